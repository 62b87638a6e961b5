package engine

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/policy"
)

// minMeasuredEntries is the size from which a list's compiled bytes are
// held to policy.MaxListCompiledBytesPerEntry: below it, a few kilobytes
// of anything else the process allocates would dominate the measure.
const minMeasuredEntries = 10_000

// ListStat describes one named list of a validated tree.
type ListStat struct {
	Name    string
	File    string
	Kind    policy.ListKind
	Entries int
	Etag    string
	// CompiledBytes is the memory the compiled list holds (measuredCompile).
	CompiledBytes int64
}

// measureLists compiles every list of a tree afresh, measuring the memory
// each holds, and refuses one whose bytes per entry are over
// policy.MaxListCompiledBytesPerEntry. It is for validation (the leader's
// child, `reconciler validate`), a process that does little else, where
// the measure is the list's; nodes compile through the shared cache.
// Each list it measures goes into that cache, so the tree's policies,
// compiled after it, share the measured table instead of building a
// second one; keep holds them until they do (the cache's references are
// weak).
func measureLists(ls policy.Lists) (stats []ListStat, errs policy.ErrorList, keep []*compiledList) {
	var out []ListStat
	for _, name := range slices.Sorted(maps.Keys(ls)) {
		l := ls[name]
		if l == nil {
			continue // invalid: its problems are reported already
		}
		st := ListStat{Name: name, File: l.File, Kind: l.Kind, Entries: l.Entries, Etag: l.Etag()}
		if cl, bytes, ok := lists.remeasure(l); ok {
			keep, st.CompiledBytes = append(keep, cl), bytes
			errs = append(errs, overCompiled(l, bytes)...)
			out = append(out, st)
			continue
		}
		cl, size, err := measuredCompile(l)
		if err != nil {
			errs = append(errs, &policy.Error{File: l.File, Msg: err.Error()})
			continue
		}
		cl = lists.put(l, cl)
		keep = append(keep, cl)
		st.CompiledBytes = size
		lists.noteMeasured(cl, st.CompiledBytes)
		errs = append(errs, overCompiled(l, st.CompiledBytes)...)
		out = append(out, st)
	}
	return out, errs, keep
}

// overCompiled is the problem of a list whose compiled bytes per entry
// are over policy.MaxListCompiledBytesPerEntry.
func overCompiled(l *policy.List, bytes int64) policy.ErrorList {
	if l.Entries < minMeasuredEntries || bytes <= int64(l.Entries)*policy.MaxListCompiledBytesPerEntry {
		return nil
	}
	return policy.ErrorList{&policy.Error{File: l.File, Msg: fmt.Sprintf(
		"compiles to %d bytes for %d entries, over the limit of %d bytes per entry (MaxListCompiledBytesPerEntry)",
		bytes, l.Entries, policy.MaxListCompiledBytesPerEntry)}}
}

// measuredCompile compiles l and says how many bytes the result holds:
// counted from the arrays of an IP list's table, measured on the heap
// around the compile for a string list's hash set (whose buckets the
// runtime sizes).
func measuredCompile(l *policy.List) (*compiledList, int64, error) {
	if l.Kind == policy.ListIP {
		cl, err := compileList(l)
		if err != nil {
			return nil, 0, err
		}
		return cl, cl.ips.bytes(), nil
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cl, err := compileList(l)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(cl)
	return cl, max(int64(after.HeapAlloc)-int64(before.HeapAlloc), 0), err
}

// FormatListStat renders a list's line of `reconciler validate`.
func FormatListStat(s ListStat) string {
	var b strings.Builder
	fmt.Fprintf(&b, "list %s (%s, %s): %d entries", s.Name, s.File, kindText(s.Kind), s.Entries)
	// Below minMeasuredEntries the heap's noise is larger than the list
	// (a 4-entry list measured 0 bytes): say so rather than print it.
	if s.Entries >= minMeasuredEntries {
		fmt.Fprintf(&b, ", %d bytes compiled (%.1f per entry)", s.CompiledBytes, float64(s.CompiledBytes)/float64(s.Entries))
	} else {
		fmt.Fprintf(&b, ", compiled size measured from %d entries", minMeasuredEntries)
	}
	fmt.Fprintf(&b, ", etag %s", s.Etag)
	return b.String()
}
