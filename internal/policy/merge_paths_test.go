package policy

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

// TestMergePathsFollowsIncludes checks that merging a policy's own files
// by path gives exactly what Load gives for that policy directory.
func TestMergePathsFollowsIncludes(t *testing.T) {
	fsys := fstest.MapFS{
		"_shared/office.toml": {Data: []byte("[[rules]]\nname = \"office\"\npriority = 10\naction = \"allow\"\nmatch = \"request.method == 'GET'\"\n")},
		"web/policy.toml":     {Data: []byte("default_action = \"deny\"\ninclude = [\"../_shared/office.toml\"]\n")},
		"web/tight.toml":      {Data: []byte("merge = \"override\"\n[[rules]]\nname = \"office\"\npriority = 10\naction = \"deny\"\nmatch = \"request.method == 'POST'\"\n")},
	}
	repo, err := Load(fsys, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := MergePaths(fsys, []string{"web/policy.toml", "web/tight.toml"}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := repo.Get("web"); got.Etag() != want.Etag() {
		t.Errorf("MergePaths etag %s, Load etag %s:\n%s\n%s", got.Etag(), want.Etag(), got.Canonical(), want.Canonical())
	}
	if got.Name != "web" || got.Rules[0].Action != ActionDeny {
		t.Errorf("name %q, rule %+v: want web and the override", got.Name, got.Rules[0])
	}
	// Including the same shared file from two listed files merges it once.
	again, err := MergePaths(fsys, []string{"web/policy.toml", "_shared/office.toml"}, LoadOptions{})
	if err != nil {
		t.Fatalf("shared file listed after being included: %v", err)
	}
	if len(again.Sources) != 2 {
		t.Errorf("sources %v: want the shared file once", again.Sources)
	}
}

func TestMergePathsErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"a/policy.toml": {Data: []byte("default_action = \"deny\"\ninclude = [\"../../outside.toml\"]\n")},
	}
	_, err := MergePaths(fsys, []string{"a/policy.toml", "a/missing.toml"}, LoadOptions{})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want two problems (escaping include, missing file), got %v", err)
	}
	if !strings.Contains(list.Error(), "escapes the policies root") || !strings.Contains(list.Error(), "a/missing.toml") {
		t.Errorf("errors do not say what is wrong: %v", list)
	}
}
