package engine

import (
	"errors"
	"maps"

	"github.com/policyrollout/reconciler/internal/policy"
)

// maxDerivedEntries bounds the entries (added and removed together) a
// list derives from its previous content instead of compiling afresh.
// Deriving costs a copy of the previous table (milliseconds for a million
// entries) plus the changed entries; the bound keeps a list that mostly
// changed on the plain path, where every line is parsed once anyway.
const maxDerivedEntries = 4096

// errFound ends a scan early (stillHeld).
var errFound = errors.New("found")

// deriveList compiles l from base, the compiled form of an earlier
// content of the same list file, by applying the lines that changed: the
// usual change to a large list (a line appended to a blocklist, one
// removed or rewritten) then costs those lines and a copy of the table,
// not a parse of the million unchanged entries, on every node. The table
// merged its entries, so a removed entry's addresses may still be held by
// other lines (the same prefix twice, a wider or narrower one): they are
// taken out, then every entry of the new content overlapping them is put
// back, which scans the new content once (parsing without building), and
// only when an entry was removed. It returns nil when more than
// maxDerivedEntries changed or a changed line does not parse; the caller
// then compiles l whole, so every problem is still reported as before.
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
	var add, gone ipTableBuilder
	n := 0
	parse := func(into *ipTableBuilder) func(int, string) error {
		return func(_ int, e string) error {
			if n++; n > maxDerivedEntries {
				return errTooManyDerived
			}
			p, err := policy.ParseIPEntry(e)
			if err != nil {
				return err
			}
			into.add(p)
			return nil
		}
	}
	if policy.EachEntry(added, l.Kind, parse(&add)) != nil || policy.EachEntry(removed, l.Kind, parse(&gone)) != nil {
		return nil
	}
	ips := base.ips // shared: minus and union write new tables
	if g := gone.table(); g.size > 0 {
		var back ipTableBuilder
		_ = l.Each(func(_ int, e string) error {
			if p, err := policy.ParseIPEntry(e); err == nil && g.overlaps(p) {
				back.add(p)
			}
			return nil
		})
		ips = ips.minus(g).union(back.table())
	}
	listDerives.Add(1)
	return &compiledList{kind: l.Kind, ips: ips.union(add.table()), entries: l.Entries, data: l.Data}
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
