package policy

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestLoadOnlyOneGroup: with LoadOptions.Group, the policies of other
// groups are listed in Elsewhere without being merged (a conflict in one
// is not a problem), and a policy.toml whose group cannot be told is
// loaded, so its problems are reported whatever the group.
func TestLoadOnlyOneGroup(t *testing.T) {
	rule := "[[rules]]\nname = \"r\"\npriority = 1\naction = \"allow\"\nmatch = \"true\"\n"
	fsys := fstest.MapFS{
		"web/policy.toml":     {Data: []byte("default_action = \"deny\"\n")},
		"edge/policy.toml":    {Data: []byte("group = \"edge\"\ndefault_action = \"deny\"\n" + rule)},
		"edge/more.toml":      {Data: []byte(rule)}, // a conflict under fail
		"other/policy.toml":   {Data: []byte("group = \"eu\"\ndefault_action = \"deny\"\n")},
		"garbled/policy.toml": {Data: []byte("group = [\n")},
	}
	repo, err := Load(fsys, LoadOptions{Group: DefaultGroup})
	if err == nil || !strings.Contains(err.Error(), "garbled/policy.toml") || strings.Contains(err.Error(), "edge") {
		t.Fatalf("problems: %v", err)
	}
	if len(repo.Policies) != 1 || repo.Policies[0].Name != "web" {
		t.Fatalf("loaded %+v", repo.Policies)
	}
	if len(repo.Elsewhere) != 2 || repo.Elsewhere["edge"] != "edge" || repo.Elsewhere["other"] != "eu" {
		t.Fatalf("elsewhere %v", repo.Elsewhere)
	}
	if _, err := Load(fsys, LoadOptions{Group: "edge"}); err == nil || !strings.Contains(err.Error(), "edge/more.toml") {
		t.Fatalf("the edge group's own conflict: %v", err)
	}
}
