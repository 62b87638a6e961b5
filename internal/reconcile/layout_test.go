package reconcile

import (
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
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

func loadAPI(t *testing.T, files map[string][]byte) *policy.Policy {
	t.Helper()
	p, err := policy.LoadPolicy(gitsource.FilesFS(files), "api", policy.LoadOptions{})
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

func TestPolicyDirKeepsTheLayoutOrFlattens(t *testing.T) {
	l := &Loop{}
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
	dir, err := l.policyDir(live, "api", &changed)
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

	// Dropping a rule the fragment defines cannot be written there: flattened.
	dropped := *p
	dropped.Rules = nil
	for _, r := range p.Rules {
		if r.Name != "admin" {
			dropped.Rules = append(dropped.Rules, r)
		}
	}
	dir, err = l.policyDir(live, "api", &dropped)
	if err != nil {
		t.Fatal(err)
	}
	if len(dir) != 1 || dir["policy.toml"] == nil {
		t.Fatalf("not flattened: %v", dir)
	}
	if e := loadAPI(t, withDir(live, "api", dir)).Etag(); e != dropped.Etag() {
		t.Errorf("the flattened policy loads to %s, want %s", e, dropped.Etag())
	}
}
