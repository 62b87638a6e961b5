package engine

import (
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

func TestNormalizePath(t *testing.T) {
	for raw, want := range map[string]string{
		"":                       "/",
		"/":                      "/",
		"/internal/metrics":      "/internal/metrics",
		"//internal/metrics":     "/internal/metrics", // attack 6
		"/./.git/config":         "/.git/config",      // attack 6
		"/a//b///c":              "/a/b/c",
		"/x/../internal/metrics": "/internal/metrics",
		"/../../etc/passwd":      "/etc/passwd",
		"/a/b/..":                "/a/",
		"/a/b/.":                 "/a/b/",
		"/a/b/":                  "/a/b/",
		"/%69nternal/metrics":    "/internal/metrics",
		"/%2e%2E/admin":          "/admin",
		"/a/%2e/b":               "/a/b",
		"/a%2fb":                 "/a%2Fb",
		"/a%2F..%2Fb":            "/a%2F..%2Fb", // an escaped slash does not split
		"/100%":                  "/100%25",
		"/%zz":                   "/%25zz",
		"/%25%32%65":             "/%252e",
		"relative/x":             "/relative/x",
		"/caf%C3%A9":             "/caf%C3%A9",
	} {
		if got := NormalizePath(raw); got != want {
			t.Errorf("NormalizePath(%q) = %q, want %q", raw, got, want)
		}
	}
}

// FuzzNormalizePath: normalising twice changes nothing, and the result is
// an absolute path without empty, "." or ".." segments and without a bare "%".
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{"//a/./b/../c", "/%2e%2e/%2F%41", "/%%32%65", "/a/..", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		once := NormalizePath(raw)
		if twice := NormalizePath(once); twice != once {
			t.Fatalf("NormalizePath(%q) = %q, and again %q", raw, once, twice)
		}
		if !strings.HasPrefix(once, "/") || strings.Contains(once, "//") {
			t.Fatalf("NormalizePath(%q) = %q", raw, once)
		}
		for _, seg := range strings.Split(once, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("NormalizePath(%q) = %q keeps a dot segment", raw, once)
			}
		}
	})
}

// TestRawPathField: request.raw_path is a field of the schema, in JSON
// (both decoders) and in CEL.
func TestRawPathField(t *testing.T) {
	for _, body := range []string{`{"path":"/a/b","raw_path":"/a//b"}`, `{"path":"/a/b", "raw_path":"/a//b", "attributes":{"x":[1]}}`} {
		req, err := DecodeRequest([]byte(body))
		if err != nil || req.RawPath != "/a//b" {
			t.Fatalf("DecodeRequest(%s) = %+v, %v", body, req, err)
		}
	}
	if _, err := DecodeRequest([]byte(`{"raw_path":"/a","raw_path":"/b"}`)); err == nil {
		t.Error("raw_path given twice was accepted")
	}
	p := &policy.Policy{Name: "p", DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny,
		Rules: []policy.Rule{{Name: "slashes", Priority: 1, Action: policy.ActionDeny, Match: "request.raw_path.contains('//')"}}}
	cp, err := Compile(p, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if d := cp.Evaluate(&Request{Path: "/a/b", RawPath: "/a//b"}); d.Verdict != Deny || d.Rule != "slashes" {
		t.Errorf("decision %+v", d)
	}
}
