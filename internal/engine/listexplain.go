package engine

import (
	"errors"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/policy"
)

// ListMatch says which entry of a named list a request's value is in, for
// tools that explain a decision (`reconciler eval --lists`).
type ListMatch struct {
	List  string `json:"list"`
	Field string `json:"field"` // the request field tested
	Value string `json:"value"`
	// Entry is the matching entry: for an IP list the longest CIDR (or
	// address) holding the value, as written in canonical form.
	Entry string `json:"entry"`
	// Line is where the entry is in the list file (1-based), 0 if not found.
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
}

// ListMatches finds, for each list cp uses, the entry the request is in:
// source_ip for an IP list; host, path, method, principal or a group for
// a string list (the fields inList is applied to in practice).
func (cp *CompiledPolicy) ListMatches(req *Request) []ListMatch {
	if cp.lists == nil {
		return nil
	}
	var out []ListMatch
	for _, name := range slices.Sorted(maps.Keys(cp.lists.byName)) {
		cl, src := cp.lists.byName[name], cp.lists.src[name]
		if cl.kind == policy.ListIP {
			if p, line, ok := cl.matchedEntry(req.SourceIP); ok {
				out = append(out, ListMatch{List: name, Field: "source_ip", Value: req.SourceIP, Entry: p.String(), File: src.File, Line: line})
			}
			continue
		}
		fields := [][2]string{{"host", req.Host}, {"path", req.Path}, {"method", req.Method}, {"principal", req.Principal}}
		for _, g := range req.Groups {
			fields = append(fields, [2]string{"groups", g})
		}
		for _, f := range fields {
			if _, ok := cl.strs[f[1]]; ok {
				out = append(out, ListMatch{List: name, Field: f[0], Value: f[1], Entry: f[1], File: src.File, Line: cl.stringLine(f[1])})
			}
		}
	}
	return out
}

// errLineFound stops a pass over a list's entries at the one it looked for.
var errLineFound = errors.New("found")

// stringLine is the first line of a string list whose entry is v, 0 if
// none. It reads the compiled list's text, which an experiment's list
// found by hash has where its policy's copy does not.
func (l *compiledList) stringLine(v string) int {
	found := 0
	_ = policy.EachEntry(l.data, l.kind, func(line int, e string) error {
		if e == v {
			found = line
			return errLineFound
		}
		return nil
	})
	return found
}

// Lists returns the named lists cp uses, sorted by name. They are shared:
// callers must not modify them.
func (cp *CompiledPolicy) Lists() []*policy.List {
	if cp.lists == nil {
		return nil
	}
	out := make([]*policy.List, 0, len(cp.lists.src))
	for _, name := range slices.Sorted(maps.Keys(cp.lists.src)) {
		out = append(out, cp.lists.src[name])
	}
	return out
}
