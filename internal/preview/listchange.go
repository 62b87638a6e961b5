package preview

import (
	"maps"
	"slices"
	"sync"

	"github.com/policyrollout/reconciler/internal/policy"
)

// ListChange is what an experiment's tree does to one named list against
// the live tree: entries added and removed (as text after trimming and
// comments), or the whole list when one of the two trees lacks it. The
// counts come from the tree, never from traffic.
type ListChange struct {
	Name     string `json:"name"`
	File     string `json:"file"`
	Added    int    `json:"added"`
	Removed  int    `json:"removed"`
	Entries  int    `json:"entries"`
	Etag     string `json:"etag"`
	LiveEtag string `json:"liveEtag,omitempty"`
}

// ListChanges compares the lists exp uses with the live tree's lists of
// the same names, in name order; unchanged lists are left out. live may
// lack a list (a new one: every entry is added).
func ListChanges(exp *policy.Policy, live policy.Lists) []ListChange {
	var out []ListChange
	for _, name := range slices.Sorted(maps.Keys(exp.Lists)) {
		l := exp.Lists[name]
		old := live[name]
		if l == nil || l.Data == nil || (old != nil && old.Hash == l.Hash) {
			continue
		}
		c := ListChange{Name: name, File: l.File, Entries: l.Entries, Etag: l.Etag()}
		if old != nil && old.Data != nil {
			c.LiveEtag = old.Etag()
			c.Added, c.Removed = diffs.counts(l, old)
		} else {
			c.Added = l.Entries
		}
		out = append(out, c)
	}
	return out
}

// diffCache remembers the counts of pairs of list contents (by content
// hash): the leader builds every experiment's ListChanges on each sync
// pass, and diffing two lists of a million entries sorts both, seconds of
// CPU and tens of MiB each time for an answer that depends only on the
// two contents.
type diffCache struct {
	mu       sync.Mutex
	m        map[[2]string][2]int
	computed int // diffs actually run, for tests
}

// maxDiffPairs bounds the pairs remembered; past it the cache starts over.
const maxDiffPairs = 64

var diffs = &diffCache{m: map[[2]string][2]int{}}

func (c *diffCache) counts(l, old *policy.List) (added, removed int) {
	key := [2]string{l.Hash, old.Hash}
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v[0], v[1]
	}
	added, removed = diffEntries(l, old)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxDiffPairs {
		clear(c.m)
	}
	c.m[key] = [2]int{added, removed}
	c.computed++
	return added, removed
}

// diffEntries counts the distinct entries of l not in old, and of old not
// in l. It holds both lists' entries as sorted slices: the lists are
// bounded by the data budgets (MaxListEntries).
func diffEntries(l, old *policy.List) (added, removed int) {
	a, b := sortedEntries(l), sortedEntries(old)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			added++
			i++
		case i == len(a) || a[i] > b[j]:
			removed++
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}

func sortedEntries(l *policy.List) []string {
	out := make([]string, 0, l.Entries)
	_ = l.Each(func(_ int, e string) error {
		out = append(out, e)
		return nil
	})
	slices.Sort(out)
	return slices.Compact(out)
}
