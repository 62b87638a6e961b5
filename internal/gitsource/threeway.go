package gitsource

import (
	"maps"
	"slices"
)

// ThreeWay merges two versions of a set of files that share an ancestor,
// at file level, as git's trivial merge does: for every path of base,
// ours or theirs (a missing key is an absent file),
//
//   - both sides agree (same content, or both deleted): that;
//   - one side left it as in base: the other side's version;
//   - both changed it, differently: a conflict, and ours is kept in the
//     result so the caller can still show something.
//
// Contents are compared with ==, so V is a blob hash (or the content).
// Conflicting paths come back sorted; nothing is ever guessed within a
// file: two edits of one file conflict even where git's line merge would
// have combined them, since a policy is only checked as a whole.
func ThreeWay[V comparable](base, ours, theirs map[string]V) (map[string]V, []string) {
	out := make(map[string]V, len(ours))
	var conflicts []string
	paths := map[string]struct{}{}
	for _, m := range []map[string]V{base, ours, theirs} {
		for p := range m {
			paths[p] = struct{}{}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		b, inB := base[p]
		o, inO := ours[p]
		t, inT := theirs[p]
		switch {
		case inO == inT && o == t: // agree, possibly both absent
		case inO == inB && o == b: // ours untouched: theirs wins
			o, inO = t, inT
		case inT == inB && t == b: // theirs untouched: ours stays
		default:
			conflicts = append(conflicts, p)
		}
		if inO {
			out[p] = o
		}
	}
	return out, conflicts
}
