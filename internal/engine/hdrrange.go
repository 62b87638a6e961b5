package engine

import (
	"math/bits"
	"slices"
)

// rangeTable combines the sets of any run of consecutive header names
// from two precomputed sets (a sparse table: levels[k][i] combines sets i
// to i+2^k-1). A policy that tests dozens of header names meets requests
// that carry one or two of them: the header term is then the AND of the
// absent sets of every other name, which would be one AND per name on
// every evaluation, and with the table is two per gap between the
// request's names.
type rangeTable struct {
	levels [][]bitset // nil: not built (see maxRangeWords)
}

// maxRangeWords bounds the words a table may hold (512 KiB); past it, the
// names are combined one by one as before. n names of w words take about
// n*log2(n)*w: 25 names over 100 rules take a few hundred.
const maxRangeWords = 1 << 16

// newRangeTable builds the table of sets combined with AND (and) or OR,
// each result passed through canon so that the combiner still recognises
// the sets that change nothing.
func newRangeTable(sets []bitset, and bool, canon func(bitset) bitset) rangeTable {
	if len(sets) < 2 || len(sets)*bits.Len(uint(len(sets)))*len(sets[0]) > maxRangeWords {
		return rangeTable{}
	}
	t := rangeTable{levels: [][]bitset{sets}}
	for k := 1; 1<<k <= len(sets); k++ {
		prev, half := t.levels[k-1], 1<<(k-1)
		cur := make([]bitset, len(sets)-1<<k+1)
		for i := range cur {
			s := slices.Clone(prev[i])
			for w, x := range prev[i+half] {
				if and {
					s[w] &= x
				} else {
					s[w] |= x
				}
			}
			cur[i] = canon(s)
		}
		t.levels = append(t.levels, cur)
	}
	return t
}

// query returns two sets whose combination is that of sets lo to hi-1
// (lo < hi). They overlap, which neither AND nor OR minds.
func (t *rangeTable) query(lo, hi int) (bitset, bitset) {
	k := bits.Len(uint(hi-lo)) - 1
	return t.levels[k][lo], t.levels[k][hi-1<<k]
}

// absentRange adds to the header term the names lo to hi-1, all missing
// from the request: their absent sets to hdr and their unguarded rules
// (a missing header makes a value test an error) to unknown.
func (ix *ruleIndex) absentRange(hdr, unknown *combiner, lo, hi int, ev *evaluation) {
	switch {
	case lo >= hi:
	case ix.absentT.levels != nil && hi-lo > 2:
		a, b := ix.absentT.query(lo, hi)
		hdr.and(a, ev)
		hdr.and(b, ev)
		a, b = ix.unguardedT.query(lo, hi)
		unknown.or(a, ev)
		unknown.or(b, ev)
	default:
		for i := lo; i < hi; i++ {
			h := &ix.headers[i]
			hdr.and(h.absent, ev)
			unknown.or(h.unguarded, ev) // no such key: an error, not false
		}
	}
}
