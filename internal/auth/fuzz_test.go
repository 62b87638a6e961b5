package auth

import (
	"strings"
	"testing"
)

// FuzzParseBearer: any header either parses to a token a Set could hold
// (which then finds exactly that credential) or is refused; nothing
// panics.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a==", "Bearer  x", "Basic x", "Bearer a b", "Bearer \x00", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, ok := ParseBearer(header)
		if !ok {
			if token != "" {
				t.Fatalf("refused %q but returned %q", header, token)
			}
			return
		}
		if strings.ContainsAny(token, " \t\r\n") || !strings.HasSuffix(header, token) {
			t.Fatalf("ParseBearer(%q) = %q", header, token)
		}
		s, err := NewSet([]Credential{{Name: "x", Role: RoleWriter, Secret: token}})
		if err != nil {
			t.Fatalf("a parsed token is not a valid secret: %q: %v", token, err)
		}
		if id, ok := s.Lookup(token); !ok || id.Name != "x" {
			t.Fatalf("Lookup(%q) = %+v, %v", token, id, ok)
		}
		if _, ok := s.Lookup(token + "a"); ok {
			t.Fatalf("a longer token matched %q", token)
		}
	})
}

// FuzzLoopbackHost: a host that passes is a name of this machine.
func FuzzLoopbackHost(f *testing.F) {
	for _, s := range []string{"localhost", "127.0.0.1:80", "[::1]", "evil.example", "a.localhost", "localhost.evil"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !LoopbackHost(host) {
			return
		}
		h := strings.ToLower(host)
		if !strings.Contains(h, "localhost") && !strings.Contains(h, "127.") && !strings.Contains(h, ":") {
			t.Fatalf("LoopbackHost(%q) = true", host)
		}
	})
}
