package preview_test

import (
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
)

// FuzzParseInput: any create or update body either fails with
// INVALID_ARGUMENT or gives a policy with the defaults of a policy.toml
// (issue 14: a minimal body must commit a valid file) and its resource
// name's prefix removed once (a name still not the live policy's is
// refused later, by Create and Update).
func FuzzParseInput(f *testing.F) {
	for _, s := range []string{`{}`, `{"policy":{"default_action":"allow"}}`,
		`{"policy":{"name":"policies/web","etag":"x","generation":3,"commit":"c","default_action":"deny","group":"g","on_error":"skip","rules":[]}}`,
		`{"policy":{"name":"web","rules":[{"name":"r","priority":1,"action":"allow","match":"true"}]},"annotations":{"a":"b"}}`,
		`{"policy":{"rules":[{"name":"r","match":" true\n","description":"\td "}]}}`, `{"policy":{"bogus":1}}`, `{"policy":null,"etag":"e"}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		in, err := preview.ParseInput([]byte(body))
		if err != nil {
			if code, _ := preview.CodeOf(err); code != preview.InvalidArgument {
				t.Fatalf("ParseInput(%q): %v", body, err)
			}
			return
		}
		if p := in.Policy; p != nil {
			if strings.HasPrefix(body, `{"policy":{"name":"policies/web",`) && p.Name != "web" || p.Group == "" || p.OnError == "" {
				t.Fatalf("ParseInput(%q) = name %q group %q on_error %q", body, p.Name, p.Group, p.OnError)
			}
			for _, r := range p.Rules { // as loading policy.toml trims them (issue 24)
				if r.Match != strings.TrimSpace(r.Match) || r.Description != strings.TrimSpace(r.Description) {
					t.Fatalf("ParseInput(%q): rule %q not trimmed", body, r.Name)
				}
			}
		}
	})
}
