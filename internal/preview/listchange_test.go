package preview

import (
	"testing"
	"testing/fstest"

	"github.com/policyrollout/reconciler/internal/policy"
)

func loadLists(t *testing.T, files map[string]string) policy.Lists {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	lists, errs := policy.LoadLists(fsys)
	if errs != nil {
		t.Fatal(errs)
	}
	return lists
}

// ListChanges counts distinct entries added and removed per changed list,
// ignoring comments, order and duplicates; a new list is all added and an
// unchanged one is left out.
func TestListChanges(t *testing.T) {
	live := loadLists(t, map[string]string{
		"_lists/block.netset": "# v1\n10.0.0.0/8\n192.0.2.0/24\n",
		"_lists/hosts.txt":    "a.example\n",
	})
	exp := &policy.Policy{Lists: loadLists(t, map[string]string{
		"_lists/block.netset": "# v2\n2001:db8::/32\n10.0.0.0/8\n10.0.0.0/8\n198.51.100.0/24\n",
		"_lists/hosts.txt":    "a.example\n",
		"_lists/new.txt":      "x\ny\n",
	})}
	got := ListChanges(exp, live)
	if len(got) != 2 || got[0].Name != "block" || got[0].Added != 2 || got[0].Removed != 1 || got[0].LiveEtag == "" ||
		got[1].Name != "new" || got[1].Added != 2 || got[1].Removed != 0 {
		t.Fatalf("changes = %+v", got)
	}
}

// The leader builds ListChanges on every sync pass: the same pair of
// contents is diffed once, and the counts come back unchanged.
func TestListChangesDiffsAPairOnce(t *testing.T) {
	live := loadLists(t, map[string]string{"_lists/once.netset": "10.1.0.0/16\n"})
	exp := &policy.Policy{Lists: loadLists(t, map[string]string{"_lists/once.netset": "10.1.0.0/16\n10.2.0.0/16\n"})}
	diffs.mu.Lock()
	clear(diffs.m) // a pair an earlier run (-count) remembered would be diffed no times here
	before := diffs.computed
	diffs.mu.Unlock()
	for range 5 {
		if got := ListChanges(exp, live); len(got) != 1 || got[0].Added != 1 || got[0].Removed != 0 {
			t.Fatalf("changes = %+v", got)
		}
	}
	diffs.mu.Lock()
	defer diffs.mu.Unlock()
	if n := diffs.computed - before; n != 1 {
		t.Fatalf("five passes over one pair of contents diffed %d times", n)
	}
}
