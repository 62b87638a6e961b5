package engine

import (
	"github.com/policyrollout/reconciler/internal/policy"
)

// maxDerivedEntries bounds the entries a list derives from its previous
// content instead of compiling afresh. Deriving costs a copy of the
// previous table (milliseconds for a million entries) plus the added
// entries; the bound keeps a list that mostly changed on the plain path,
// where every line is parsed once anyway.
const maxDerivedEntries = 4096

// deriveList compiles l from base, the compiled form of an earlier
// content of the same list file, when l only adds lines to it: the usual
// change to a large list (one line appended to a blocklist) then costs the
// added entries and a copy of the table, not a parse of the million
// unchanged entries, on every node. It returns
// nil when l removes or rewrites an entry, adds more than
// maxDerivedEntries, or has a line it cannot parse; the caller then
// compiles l whole, so every problem is still reported as before. A
// removal is never derived because the table merged the entries: the
// addresses of a removed line may still be in another (the same prefix
// twice, or a wider one).
func deriveList(base *compiledList, l *policy.List) *compiledList {
	if base == nil || base.kind != policy.ListIP || l.Kind != policy.ListIP || base.data == nil || l.Data == nil {
		return nil
	}
	removed, added := policy.ChangedLines(base.data, l.Data)
	if hasEntry(removed) {
		return nil
	}
	var add ipTableBuilder
	n := 0
	err := policy.EachEntry(added, l.Kind, func(_ int, e string) error {
		if n++; n > maxDerivedEntries {
			return errTooManyDerived
		}
		p, err := policy.ParseIPEntry(e)
		if err != nil {
			return err
		}
		add.add(p)
		return nil
	})
	if err != nil {
		return nil
	}
	listDerives.Add(1)
	// base is shared: union writes a new table.
	return &compiledList{kind: l.Kind, ips: base.ips.union(add.table()), entries: l.Entries, data: l.Data}
}

// hasEntry reports whether lines hold an entry of an IP list.
func hasEntry(lines []byte) bool {
	return policy.EachEntry(lines, policy.ListIP, func(int, string) error { return errTooManyDerived }) != nil
}
