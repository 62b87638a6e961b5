package engine

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestGatewayPath(t *testing.T) {
	type want struct{ reject, unescape, keep string } // reject "" means refused
	for raw, w := range map[string]want{
		"/internal/metrics":    {"/internal/metrics", "/internal/metrics", "/internal/metrics"},
		"//internal/./metrics": {"/internal/metrics", "/internal/metrics", "/internal/metrics"},
		"/%61dmin":             {"/admin", "/admin", "/admin"},
		"/%2finternal/metrics": {"", "/internal/metrics", "/%2Finternal/metrics"},
		"/internal%2Fmetrics":  {"", "/internal/metrics", "/internal%2Fmetrics"},
		`/internal\metrics`:    {"", "/internal/metrics", `/internal\metrics`},
		"/internal%5cmetrics":  {"", "/internal/metrics", "/internal%5Cmetrics"},
		"/a%2F..%2Fadmin":      {"", "/admin", "/a%2F..%2Fadmin"},
		`/a\..\admin`:          {"", "/admin", `/a\..\admin`},
		"/%252F":               {"/%2F", "/%2F", "/%2F"}, // an escaped "%", then "2F": no slash
		"/100%":                {"/100%", "/100%", "/100%"},
		"/caf%C3%A9":           {"/café", "/café", "/café"},
		"/a%3Fb":               {"/a?b", "/a?b", "/a?b"},
	} {
		for a, want := range map[EscapedSlashes]string{RejectEscapedSlashes: w.reject, UnescapeSlashes: w.unescape, KeepEscapedSlashes: w.keep} {
			got, err := GatewayPath(raw, a)
			if want == "" {
				if !errors.Is(err, ErrEscapedSlash) {
					t.Errorf("GatewayPath(%q, %s) = %q, %v; want ErrEscapedSlash", raw, a, got, err)
				}
				continue
			}
			if err != nil || got != want {
				t.Errorf("GatewayPath(%q, %s) = %q, %v; want %q", raw, a, got, err, want)
			}
		}
	}
	if strings.Contains(ErrEscapedSlash.Error(), "internal") {
		t.Error("the refusal names the path")
	}
}

func TestParseEscapedSlashes(t *testing.T) {
	for _, a := range []EscapedSlashes{RejectEscapedSlashes, UnescapeSlashes, KeepEscapedSlashes} {
		if got, ok := ParseEscapedSlashes(a.String()); !ok || got != a {
			t.Errorf("ParseEscapedSlashes(%q) = %v, %v", a.String(), got, ok)
		}
	}
	if _, ok := ParseEscapedSlashes("REJECT"); ok {
		t.Error("names are lower-case")
	}
}

// TestRawPathDefaultsToPath: in the JSON form and in policy tests,
// raw_path is the path when none is given, so that a rule on raw_path
// means the same in every decision form (issue 22, finding 11).
func TestRawPathDefaultsToPath(t *testing.T) {
	for _, body := range []string{`{"path":"/static/../x"}`, `{"path":"/static/../x","attributes":{"a":[1]}}`} {
		if req, err := DecodeRequest([]byte(body)); err != nil || req.RawPath != "/static/../x" {
			t.Errorf("DecodeRequest(%s) = %+v, %v", body, req, err)
		}
	}
	if req, err := RequestFromMap(map[string]any{"path": "/static/../x"}); err != nil || req.RawPath != "/static/../x" {
		t.Errorf("RequestFromMap = %+v, %v", req, err)
	}
	if req, err := DecodeRequest([]byte(`{"path":"/x","raw_path":"//x"}`)); err != nil || req.RawPath != "//x" {
		t.Errorf("a given raw_path was replaced: %+v, %v", req, err)
	}
}

// FuzzGatewayPath: the one reading of a gateway path. Under "unescape" the
// result is absolute, without repeated slashes, backslashes or dot
// segments, and reading it again (escaped) gives it back; "reject" refuses
// exactly the paths that "unescape" changes by its unescaping and
// otherwise agrees with it; "keep" yields no slash that was escaped.
func FuzzGatewayPath(f *testing.F) {
	for _, s := range []string{"/%2finternal/metrics", `/a\..\b`, "/%252F", "/a%2F..%2Fb", "//x/./y/../z", "/%5c%5C", "%", "/%2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		un, err := GatewayPath(raw, UnescapeSlashes)
		if err != nil {
			t.Fatalf("unescape refused %q: %v", raw, err)
		}
		if !strings.HasPrefix(un, "/") || strings.Contains(un, "//") || strings.Contains(un, `\`) {
			t.Fatalf("GatewayPath(%q, unescape) = %q", raw, un)
		}
		for _, seg := range strings.Split(un, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("GatewayPath(%q, unescape) = %q keeps a dot segment", raw, un)
			}
		}
		if again, _ := GatewayPath((&url.URL{Path: un}).EscapedPath(), UnescapeSlashes); again != un {
			t.Fatalf("GatewayPath(%q, unescape) = %q, read again %q", raw, un, again)
		}
		rej, err := GatewayPath(raw, RejectEscapedSlashes)
		if (err != nil) != hasSlashEscape(raw) || (err == nil && rej != un) {
			t.Fatalf("GatewayPath(%q, reject) = %q, %v; unescape %q", raw, rej, err, un)
		}
		keep, _ := GatewayPath(raw, KeepEscapedSlashes)
		if strings.Count(keep, "/") > strings.Count(NormalizePath(raw), "/") {
			t.Fatalf("GatewayPath(%q, keep) = %q decoded an escaped slash", raw, keep)
		}
	})
}

// BenchmarkGatewayPath is the path reading of one gateway check, for a
// plain path and for one with escapes, in each mode; NormalizePath alone
// (what issue 16 added) for comparison.
func BenchmarkGatewayPath(b *testing.B) {
	for name, raw := range map[string]string{"plain": "/account/login/static/js/app.4f9c1e.js", "escaped": "/a%2Fb/%7Euser/..%2F%41dmin\\x"} {
		b.Run(name+"/NormalizePath", func(b *testing.B) {
			for b.Loop() {
				_, _ = url.PathUnescape(NormalizePath(raw))
			}
		})
		for _, a := range []EscapedSlashes{RejectEscapedSlashes, UnescapeSlashes, KeepEscapedSlashes} {
			b.Run(name+"/"+a.String(), func(b *testing.B) {
				for b.Loop() {
					_, _ = GatewayPath(raw, a)
				}
			})
		}
	}
}
