package auth

import (
	"strings"
	"testing"
)

func TestParseBearer(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  a-b.c_d~e+f/g==", "a-b.c_d~e+f/g==", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"abc", "", false},
		{"Bearer a b", "", false},
		{"Bearer =abc", "", false},
		{"Bearer ab=c", "", false},
		{"Bearer abc\n", "", false},
		{"Bearer " + strings.Repeat("a", maxSecret+1), "", false},
	} {
		got, ok := ParseBearer(tc.header)
		if got != tc.token || ok != tc.ok {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.token, tc.ok)
		}
	}
}

func TestSetLookup(t *testing.T) {
	s, err := NewSet([]Credential{
		{Name: "ops", Role: RoleAdmin, Secret: "admin-token-1"},
		{Name: "ci", Role: RoleWriter, Secret: "writer-token-1"},
		{Name: "dash", Role: RoleReader, Secret: "reader-token-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]Identity{
		"admin-token-1":  {Name: "ops", Role: RoleAdmin},
		"writer-token-1": {Name: "ci", Role: RoleWriter},
		"reader-token-1": {Name: "dash", Role: RoleReader},
	} {
		if got, ok := s.Lookup(token); !ok || got != want {
			t.Errorf("Lookup(%q) = %+v, %v", token, got, ok)
		}
	}
	for _, bad := range []string{"", "admin-token", "admin-token-1 ", "ADMIN-TOKEN-1", strings.Repeat("x", maxSecret+1)} {
		if id, ok := s.Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %+v", bad, id)
		}
	}
	if s.Empty() || !(*Set)(nil).Empty() || !(&Set{}).Empty() {
		t.Error("Empty is wrong")
	}
}

func TestNewSetRefusesBadCredentials(t *testing.T) {
	for name, creds := range map[string][]Credential{
		"no name":     {{Role: RoleAdmin, Secret: "t"}},
		"same name":   {{Name: "a", Role: RoleAdmin, Secret: "t1"}, {Name: "a", Role: RoleReader, Secret: "t2"}},
		"no role":     {{Name: "a", Secret: "t"}},
		"empty":       {{Name: "a", Role: RoleAdmin}},
		"space":       {{Name: "a", Role: RoleAdmin, Secret: "two words"}},
		"same secret": {{Name: "a", Role: RoleAdmin, Secret: "t"}, {Name: "b", Role: RoleReader, Secret: "t"}},
	} {
		_, err := NewSet(creds)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, c := range creds {
			if len(c.Secret) > 1 && strings.Contains(err.Error(), c.Secret) {
				t.Errorf("%s: the error shows a secret: %v", name, err)
			}
		}
	}
}

func TestRoles(t *testing.T) {
	for _, name := range []string{"reader", "writer", "admin"} {
		r, err := ParseRole(name)
		if err != nil || r.String() != name {
			t.Errorf("ParseRole(%q) = %v, %v", name, r, err)
		}
	}
	if _, err := ParseRole("root"); err == nil {
		t.Error("root is a role")
	}
	if !(RoleReader < RoleWriter && RoleWriter < RoleAdmin) {
		t.Error("roles are not ordered")
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:8181": true, "localhost.": true, "app.localhost:1": true,
		"127.0.0.1": true, "127.0.0.1:8181": true, "127.9.9.9": true, "[::1]:8181": true, "::1": true,
		"[::ffff:127.0.0.1]:80": true, "": false,
		"evil.example": false, "evil.example:8181": false, "localhost.evil.example": false,
		"127.0.0.1.nip.io": false, "10.0.0.1:8181": false, "0.0.0.0:8181": false, "[::]:8181": false,
		"2130706433": false, "0x7f.1": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v", host, got)
		}
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:8181": true, "localhost:0": true, "[::1]:1": true,
		":8181": false, "0.0.0.0:8181": false, "10.1.2.3:8181": false, "127.0.0.1": false,
	} {
		if got := LoopbackAddr(addr); got != want {
			t.Errorf("LoopbackAddr(%q) = %v", addr, got)
		}
	}
}
