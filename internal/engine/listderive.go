package engine

import (
	"errors"
	"maps"
	"net/netip"

	"github.com/policyrollout/reconciler/internal/policy"
)

// maxDerivedEntries bounds the entries a list derives from its previous
// content (added and removed together) instead of compiling afresh: each
// copy-on-write insert or delete clones the trie's path (microseconds and
// a few KiB), so past a few thousand a fresh compile (about a second for
// a million entries) is the cheaper.
const maxDerivedEntries = 4096

// errFound ends a scan early (stillHeld).
var errFound = errors.New("found")

// deriveList compiles l from base, the compiled form of an earlier
// content of the same list file, by applying the lines that changed: the
// usual change to a large list (a line appended to a blocklist, one
// removed or rewritten) then costs those lines, not the million unchanged
// ones, on every node. A list may hold one entry on several lines (a
// prefix also written with host bits, or as an IPv4-mapped address), so
// an entry whose line was removed leaves the table only when no line of
// the new content still holds it: finding out scans the new content once
// (a third of a fresh compile, parsing without inserting), and only when
// an entry was removed. It returns nil when more than maxDerivedEntries
// changed or a changed line does not parse; the caller then compiles l
// whole, so every problem is still reported as before.
func deriveList(base *compiledList, l *policy.List) *compiledList {
	if base == nil || base.kind != l.Kind || base.data == nil || l.Data == nil {
		return nil
	}
	removed, added := policy.ChangedLines(base.data, l.Data)
	switch l.Kind {
	case policy.ListIP:
		return deriveIPs(base, l, removed, added)
	case policy.ListString:
		return deriveStrings(base, l, removed, added)
	}
	return nil
}

func deriveIPs(base *compiledList, l *policy.List, removed, added []byte) *compiledList {
	var add, gone []netip.Prefix
	n := 0
	parse := func(into *[]netip.Prefix) func(int, string) error {
		return func(_ int, e string) error {
			if n++; n > maxDerivedEntries {
				return errTooManyDerived
			}
			p, err := policy.ParseIPEntry(e)
			*into = append(*into, p)
			return err
		}
	}
	if policy.EachEntry(added, l.Kind, parse(&add)) != nil || policy.EachEntry(removed, l.Kind, parse(&gone)) != nil {
		return nil
	}
	ips := base.ips
	if len(gone) > 0 {
		left := make(map[netip.Prefix]bool, len(gone))
		for _, p := range gone {
			left[p] = true
		}
		stillHeld(l.Data, l.Kind, len(left), func(e string) bool {
			p, err := policy.ParseIPEntry(e)
			if err == nil && left[p] {
				delete(left, p)
			}
			return len(left) == 0
		})
		for p := range left {
			ips = ips.DeletePersist(p) // base is shared: never written
		}
	}
	for _, p := range add {
		ips = ips.InsertPersist(p)
	}
	listDerives.Add(1)
	return &compiledList{kind: l.Kind, ips: ips, entries: l.Entries, data: l.Data}
}

// deriveStrings copies base's set (a copy of the table, not a new
// insert per entry) and applies the changed lines to it.
func deriveStrings(base *compiledList, l *policy.List, removed, added []byte) *compiledList {
	var add, gone []string
	n := 0
	collect := func(into *[]string) func(int, string) error {
		return func(_ int, e string) error {
			if n++; n > maxDerivedEntries {
				return errTooManyDerived
			}
			*into = append(*into, e)
			return nil
		}
	}
	if policy.EachEntry(added, l.Kind, collect(&add)) != nil || policy.EachEntry(removed, l.Kind, collect(&gone)) != nil {
		return nil
	}
	strs := maps.Clone(base.strs)
	if len(gone) > 0 {
		left := make(map[string]bool, len(gone))
		for _, s := range gone {
			left[s] = true
		}
		stillHeld(l.Data, l.Kind, len(left), func(e string) bool {
			delete(left, e)
			return len(left) == 0
		})
		for s := range left {
			delete(strs, s)
		}
	}
	for _, s := range add {
		strs[s] = struct{}{}
	}
	listDerives.Add(1)
	return &compiledList{kind: l.Kind, strs: strs, entries: l.Entries, data: l.Data}
}

// stillHeld calls found with every entry of data until it returns true
// (every removed entry was found on another line).
func stillHeld(data []byte, kind policy.ListKind, want int, found func(entry string) bool) {
	if want == 0 {
		return
	}
	_ = policy.EachEntry(data, kind, func(_ int, e string) error {
		if found(e) {
			return errFound
		}
		return nil
	})
}
