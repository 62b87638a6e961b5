package reconcile

import (
	"errors"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// layoutTree is a policy spread over an include, a fragment and a test file.
func layoutTree() map[string][]byte {
	return map[string][]byte{
		"_shared/office.toml": []byte("[[rules]]\nname = \"office\"\npriority = 200\naction = \"allow\"\nmatch = \"request.source_ip == '192.0.2.1'\"\n"),
		"api/policy.toml": []byte("# api: three files\ndefault_action = \"deny\"\ninclude = [\"../_shared/office.toml\"]\n\n" +
			"[[rules]]\nname = \"health\"\npriority = 100\naction = \"allow\"\nmatch = \"request.path == '/healthz'\"\n"),
		"api/admin.toml":     []byte("[[rules]]\nname = \"admin\"\npriority = 50\naction = \"deny\"\nmatch = \"request.path.startsWith('/admin')\"\n"),
		"api/tests/api.toml": []byte("[[tests]]\nname = \"health\"\nrequest = { path = \"/healthz\" }\nexpect = \"allow\"\n"),
	}
}

func loadAPI(t *testing.T, files map[string][]byte, pol ...string) *policy.Policy {
	t.Helper()
	name := "api"
	if len(pol) > 0 {
		name = pol[0]
	}
	p, err := policy.LoadPolicy(gitsource.FilesFS(files), name, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func withDir(live map[string][]byte, pol string, dir map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range live {
		if !strings.HasPrefix(k, pol+"/") {
			out[k] = v
		}
	}
	for k, v := range dir {
		out[pol+"/"+k] = v
	}
	return out
}

func TestPolicyDirKeepsTheLayout(t *testing.T) {
	c := &Committer{cfg: &Config{}}
	live := layoutTree()
	p := loadAPI(t, live)

	// A changed rule of policy.toml: only policy.toml is rewritten.
	changed := *p
	changed.Rules = append([]policy.Rule(nil), p.Rules...)
	for i := range changed.Rules {
		if changed.Rules[i].Name == "health" {
			changed.Rules[i].Match = "request.path in ['/healthz', '/livez']"
		}
	}
	dir, err := c.policyDir(live, "api", &changed)
	if err != nil {
		t.Fatal(err)
	}
	if len(dir) != 3 || string(dir["admin.toml"]) != string(live["api/admin.toml"]) {
		t.Fatalf("files %v", dir)
	}
	got := string(dir["policy.toml"])
	if !strings.HasPrefix(got, "# api: three files\n") || !strings.Contains(got, "../_shared/office.toml") ||
		strings.Contains(got, "admin") || strings.Contains(got, "office\"") {
		t.Errorf("policy.toml:\n%s", got)
	}
	if e := loadAPI(t, withDir(live, "api", dir)).Etag(); e != changed.Etag() {
		t.Errorf("the kept layout loads to %s, want %s", e, changed.Etag())
	}

	// A rule of the directory's fragment changed, another dropped: the
	// fragment is rewritten, policy.toml and the test file stay.
	live["api/admin.toml"] = append(live["api/admin.toml"], []byte("\n[[rules]]\nname = \"admin-2\"\npriority = 60\naction = \"deny\"\nmatch = \"request.path == '/root'\"\n")...)
	p = loadAPI(t, live)
	edited := *p
	edited.Rules = nil
	for _, r := range p.Rules {
		switch r.Name {
		case "admin":
			r.Match = "request.path.startsWith('/admin/')"
		case "admin-2":
			continue
		}
		edited.Rules = append(edited.Rules, r)
	}
	dir, err = c.policyDir(live, "api", &edited)
	if err != nil {
		t.Fatal(err)
	}
	if len(dir) != 3 || string(dir["policy.toml"]) != string(live["api/policy.toml"]) ||
		string(dir["tests/api.toml"]) != string(live["api/tests/api.toml"]) ||
		!strings.Contains(string(dir["admin.toml"]), "/admin/") || strings.Contains(string(dir["admin.toml"]), "admin-2") {
		t.Fatalf("files %q", dir)
	}
	if e := loadAPI(t, withDir(live, "api", dir)).Etag(); e != edited.Etag() {
		t.Errorf("the patched fragment loads to %s, want %s", e, edited.Etag())
	}

	// Dropping a rule of the shared include cannot be written there (other
	// policies use it): refused, never flattened.
	dropped := *p
	dropped.Rules = nil
	for _, r := range p.Rules {
		if r.Name != "office" {
			dropped.Rules = append(dropped.Rules, r)
		}
	}
	var refused *preview.Error
	if dir, err := c.policyDir(live, "api", &dropped); !errors.As(err, &refused) ||
		refused.Code != preview.FailedPrecondition || !strings.Contains(err.Error(), "_shared/office.toml") {
		t.Fatalf("dropping a shared rule: %v, files %q", err, dir)
	}
}

// A rule dropped from a policy is removed from every file of its
// directory that defines it (a definition left behind would come back in
// the merge); a test changed in its test file is changed there; a test
// dropped leaves its file, or deletes the file it was alone in.
func TestPolicyDirDropsEveryDefinition(t *testing.T) {
	c := &Committer{cfg: &Config{}}
	live := map[string][]byte{}
	for k, v := range exampleFiles(t) {
		live[k] = []byte(v)
	}
	p, err := policy.LoadPolicy(gitsource.FilesFS(live), "edge-firewall", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := *p
	next.Rules, next.Tests = nil, nil
	for _, r := range p.Rules {
		if r.Name != "deny-known-bad-ipv4" {
			next.Rules = append(next.Rules, r)
		}
	}
	dropped := map[string]bool{}
	for _, tt := range p.Tests {
		switch {
		case tt.Rule != nil && *tt.Rule == "deny-known-bad-ipv4", strings.HasSuffix(tt.Pos.File, "tests/shared.toml"):
			dropped[tt.Pos.File] = true
		default:
			next.Tests = append(next.Tests, tt)
		}
	}
	dir, err := c.policyDir(live, "edge-firewall", &next)
	if err != nil {
		t.Fatal(err)
	}
	for rel, data := range dir {
		file := "edge-firewall/" + rel
		if string(data) != string(live[file]) && rel != "policy.toml" && rel != "baseline.toml" && !dropped[file] {
			t.Errorf("%s changed", file)
		}
		if strings.Contains(string(data), `name = "deny-known-bad-ipv4"`) {
			t.Errorf("%s still defines deny-known-bad-ipv4", file)
		}
	}
	if _, ok := dir["tests/shared.toml"]; ok {
		t.Error("tests/shared.toml, left without tests, is still there")
	}
	if e := loadAPI(t, withDir(live, "edge-firewall", dir), "edge-firewall").Etag(); e != next.Etag() {
		t.Errorf("the edited directory loads to %s, want %s", e, next.Etag())
	}
}

// BenchmarkPolicyDir is the cost of writing a one-rule change of
// admin-api (five files, one shared include) in place.
func BenchmarkPolicyDir(b *testing.B) {
	live := map[string][]byte{}
	for k, v := range exampleFiles(b) {
		live[k] = []byte(v)
	}
	p, err := policy.LoadPolicy(gitsource.FilesFS(live), "admin-api", policy.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	next := *p
	next.Rules = append([]policy.Rule(nil), p.Rules...)
	next.Rules[len(next.Rules)-1].Match += " && true"
	c := &Committer{cfg: &Config{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.policyDir(live, "admin-api", &next); err != nil {
			b.Fatal(err)
		}
	}
}

// Flipping a rule of a fragment into and out of preview writes only that
// rule's preview line: the API experiment of a one-line pull request.
func TestPolicyDirFlipsPreview(t *testing.T) {
	c := &Committer{cfg: &Config{}}
	live := layoutTree()
	flip := func(p *policy.Policy, on bool) *policy.Policy {
		c := *p
		c.Rules = append([]policy.Rule(nil), p.Rules...)
		for i := range c.Rules {
			if c.Rules[i].Name == "admin" {
				c.Rules[i].Preview = on
			}
		}
		return &c
	}
	previewed := flip(loadAPI(t, live), true)
	dir, err := c.policyDir(live, "api", previewed)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(live["api/admin.toml"]) + "preview = true\n"; string(dir["admin.toml"]) != want ||
		string(dir["policy.toml"]) != string(live["api/policy.toml"]) {
		t.Fatalf("files %q", dir)
	}
	inPreview := withDir(live, "api", dir)
	if e := loadAPI(t, inPreview).Etag(); e != previewed.Etag() {
		t.Fatalf("loads to %s, want %s", e, previewed.Etag())
	}
	dir, err = c.policyDir(inPreview, "api", flip(previewed, false))
	if err != nil {
		t.Fatal(err)
	}
	if string(dir["admin.toml"]) != string(live["api/admin.toml"]) {
		t.Fatalf("enforced again:\n%s", dir["admin.toml"])
	}
}
