package policy

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"
)

// A rule's `preview = true` survives every way a policy travels: loading,
// the canonical form (so the etag changes when a rule is flipped), the
// merged TOML, JSON, an in-place edit and Keystone's OVERRIDE merge.
func TestPreviewRuleKeyRoundTrips(t *testing.T) {
	fsys := fstest.MapFS{
		"p/policy.toml": {Data: []byte(`default_action = "allow"
merge = "override"

[[rules]]
name = "scrapers"
priority = 10
action = "deny"
match = "request.path == '/x'"
preview = true
`)},
		"p/more.toml": {Data: []byte(`[[rules]]
name = "other"
priority = 20
action = "deny"
match = "request.path == '/y'"
preview = true
`)},
	}
	p, err := LoadPolicy(fsys, "p", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 2 || !p.Rules[0].Preview || !p.Rules[1].Preview {
		t.Fatalf("rules = %+v, want both in preview", p.Rules)
	}
	enforced := *p
	enforced.Rules = append([]Rule(nil), p.Rules...)
	enforced.Rules[0].Preview = false
	if enforced.Etag() == p.Etag() {
		t.Fatal("flipping preview kept the etag")
	}
	toml, err := p.MarshalTOML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(toml), "preview = true") != 2 {
		t.Fatalf("MarshalTOML lost the key:\n%s", toml)
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Policy
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Etag() != p.Etag() {
		t.Fatalf("JSON round trip changed the etag: %s", js)
	}
	// Keystone OVERRIDE from a fragment carries the fragment's rule whole,
	// its preview key included.
	fsys["p/zz.toml"] = &fstest.MapFile{Data: []byte(`[[rules]]
name = "scrapers"
priority = 10
action = "deny"
match = "request.path == '/x'"
`)}
	over, err := LoadPolicy(fsys, "p", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range over.Rules {
		if r.Name == "scrapers" && r.Preview {
			t.Fatal("OVERRIDE kept the first definition's preview key")
		}
	}
}

func TestPreviewRuleMustBeABoolean(t *testing.T) {
	_, errs := decodeFile("p/policy.toml", []byte(`default_action = "allow"
[[rules]]
name = "r"
priority = 1
action = "deny"
match = "true"
preview = "yes"
`), kindPolicy)
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "preview must be a boolean") {
		t.Fatalf("errors = %v", errs)
	}
}

// Flipping a rule from preview to enforced in place removes exactly the
// preview line; the other way adds it.
func TestFileEditorFlipsPreview(t *testing.T) {
	src := "default_action = \"allow\"\n\n[[rules]]\nname = \"r\" # keep\npriority = 1\naction = \"deny\"\nmatch = \"true\"\npreview = true\n"
	old := Rule{Name: "r", Priority: 1, Action: ActionDeny, Match: "true", Preview: true}
	now := old
	now.Preview = false
	out := edited(t, src, func(f *FileEditor) error { return f.SetRule(old, now) })
	if want := strings.Replace(src, "preview = true\n", "", 1); out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if back := edited(t, out, func(f *FileEditor) error { return f.SetRule(now, old) }); back != src {
		t.Fatalf("got\n%s\nwant\n%s", back, src)
	}
}
