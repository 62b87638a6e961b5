package policy

import "bytes"

// ChangedLines splits the difference between old and new into the whole
// lines old has there (removed) and new has there (added): the bytes
// outside are a common prefix and a common suffix, both of whole lines.
func ChangedLines(old, new []byte) (removed, added []byte) {
	n := min(len(old), len(new))
	p := 0
	for p < n && old[p] == new[p] {
		p++
	}
	// The prefix ends after its last newline; the suffix, which must not
	// reach into it, starts at a line start of both: where it begins if
	// a newline (or nothing) precedes it in both, else after its first
	// newline, which, being inside the common bytes, ends a line in both.
	start := bytes.LastIndexByte(old[:p], '\n') + 1
	s := 0
	for s < n-start && old[len(old)-1-s] == new[len(new)-1-s] {
		s++
	}
	atLineStart := func(b []byte) bool { i := len(b) - s - 1; return i < 0 || b[i] == '\n' }
	suffix := 0
	if atLineStart(old) && atLineStart(new) {
		suffix = s
	} else if i := bytes.IndexByte(new[len(new)-s:], '\n'); i >= 0 {
		suffix = s - i - 1
	}
	return old[start : len(old)-suffix], new[start : len(new)-suffix]
}

// maxRevalidatedBytes bounds the changed lines a list revalidates alone
// instead of whole: past it the diff saves little.
const maxRevalidatedBytes = 1 << 20

// revalidate validates data, a new content of the file base was validated
// from, by validating only the lines that changed: the others are
// base's, valid already. It returns nil, for the caller to validate data
// whole (and report any problem with its line number), when the changed
// lines have a problem, the entries go over MaxListEntries, or too much
// changed. Nodes and the leader load every generation's tree, so a
// one-line change to a million-line list costs them one line, not a
// million.
func revalidate(base *List, file, name string, kind ListKind, data []byte) *List {
	if base == nil || base.Kind != kind || base.File != file || base.Data == nil {
		return nil
	}
	removed, added := ChangedLines(base.Data, data)
	if len(added) > maxRevalidatedBytes || len(removed) > maxRevalidatedBytes {
		return nil
	}
	part, errs := parseListData(file, name, kind, added)
	if errs != nil {
		return nil
	}
	gone := 0
	_ = eachLine(removed, kind, func(int, string) error { gone++; return nil })
	entries := base.Entries - gone + part.Entries
	if entries > MaxListEntries {
		return nil
	}
	return &List{Name: name, File: file, Kind: kind, Entries: entries, Data: data}
}
