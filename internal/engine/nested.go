package engine

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
)

// Path prefixes and IP ranges share one structure: a sorted list of keys
// that nest (a prefix of a prefix, a range inside a range) or are disjoint.
// For a lookup value v, every key that "contains" v is an ancestor-or-self
// of the last key sorted at or before v, so one binary search and a short
// walk up the parent chain find the deepest containing key. Each key
// carries the union of the rules of itself and all its ancestors, so that
// one bitset answers the lookup: cost O(log keys + nesting depth).

// prefixSet indexes path prefixes.
type prefixSet struct {
	keys   []string
	parent []int32
	cum    []bitset
}

// lookup returns the rules with a prefix of path, or none.
func (s *prefixSet) lookup(path string, none bitset) bitset {
	// q: the last key <= path.
	lo, hi := 0, len(s.keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.keys[m] <= path {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for q := int32(lo - 1); q >= 0; q = s.parent[q] {
		if strings.HasPrefix(path, s.keys[q]) {
			return s.cum[q]
		}
	}
	return none
}

// rangeSet indexes IP ranges, one spanSet per family: ranges of different
// families never contain each other, and integer keys make the binary
// search several times cheaper than comparing netip values.
type rangeSet struct {
	v4, v6 spanSet
}

// lookup returns the rules with a range containing a, or none.
func (s *rangeSet) lookup(a netip.Addr, none bitset) bitset {
	if a.Is4() {
		return s.v4.lookup(u128From(a), none)
	}
	return s.v6.lookup(u128From(a), none)
}

// spanSet is a prefix set over one family, each range as [lo, hi].
type spanSet struct {
	lo, hi []u128
	parent []int32
	cum    []bitset
}

func (s *spanSet) lookup(a u128, none bitset) bitset {
	lo, hi := 0, len(s.lo)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !a.less(s.lo[m]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	// Every key on the chain starts at or before a; it contains a when it
	// also ends at or after it.
	for q := int32(lo - 1); q >= 0; q = s.parent[q] {
		if !s.hi[q].less(a) {
			return s.cum[q]
		}
	}
	return none
}

// u128 is an address as a 128-bit integer (IPv4 in the low 32 bits).
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func u128From(a netip.Addr) u128 {
	b := a.As16()
	if a.Is4() {
		return u128{lo: uint64(binary.BigEndian.Uint32(b[12:]))}
	}
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

// span returns the first and last address of a masked prefix.
func span(p netip.Prefix) (u128, u128) {
	lo := u128From(p.Addr())
	host := p.Addr().BitLen() - p.Bits() // number of host bits
	hi := lo
	// Go defines x<<64 as 0, so 1<<64-1 is all ones: /0 needs no special case.
	if host >= 64 {
		hi.lo = ^uint64(0)
		hi.hi |= uint64(1)<<(host-64) - 1
	} else {
		hi.lo |= uint64(1)<<host - 1
	}
	return lo, hi
}

// nestedBuilder collects keys with their rules and builds the parent
// chains and cumulative sets; K is string or netip.Prefix.
type nestedBuilder[K comparable] struct {
	n        int
	own      map[K]bitset
	compare  func(a, b K) int
	contains func(outer, inner K) bool
}

type prefixBuilder = nestedBuilder[string]
type rangeBuilder = nestedBuilder[netip.Prefix]

func newPrefixBuilder(n int) *prefixBuilder {
	return &prefixBuilder{n: n, own: map[string]bitset{}, compare: strings.Compare,
		contains: func(outer, inner string) bool { return strings.HasPrefix(inner, outer) }}
}

func newRangeBuilder(n int) *rangeBuilder {
	return &rangeBuilder{n: n, own: map[netip.Prefix]bitset{}, compare: ipLess,
		contains: func(outer, inner netip.Prefix) bool {
			return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
		}}
}

func (b *nestedBuilder[K]) add(k K, rule int) {
	if b.own[k] == nil {
		b.own[k] = newBitset(b.n)
	}
	b.own[k].set(rule)
}

// sorted returns the keys in order with parents found by a stack walk: in
// sorted order a key's ancestors are exactly the stacked keys containing it.
func (b *nestedBuilder[K]) sorted() (keys []K, parent []int32, cum []bitset) {
	for k := range b.own {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, b.compare)
	parent = make([]int32, len(keys))
	cum = make([]bitset, len(keys))
	var stack []int32
	for i, k := range keys {
		for len(stack) > 0 && !b.contains(keys[stack[len(stack)-1]], k) {
			stack = stack[:len(stack)-1]
		}
		parent[i] = -1
		cum[i] = slices.Clone(b.own[k])
		if len(stack) > 0 {
			parent[i] = stack[len(stack)-1]
			cum[i].or(cum[parent[i]])
		}
		stack = append(stack, int32(i))
	}
	return keys, parent, cum
}

func buildPrefixSet(b *prefixBuilder) prefixSet {
	keys, parent, cum := b.sorted()
	return prefixSet{keys: keys, parent: parent, cum: cum}
}

// buildRangeSet splits the sorted ranges by family. IPv4 sorts first and
// no chain crosses families, so the IPv6 part only needs its parents
// shifted.
func buildRangeSet(b *rangeBuilder) rangeSet {
	keys, parent, cum := b.sorted()
	n4 := 0
	for n4 < len(keys) && keys[n4].Addr().Is4() {
		n4++
	}
	return rangeSet{v4: newSpanSet(keys[:n4], parent[:n4], cum[:n4], 0),
		v6: newSpanSet(keys[n4:], parent[n4:], cum[n4:], int32(n4))}
}

func newSpanSet(keys []netip.Prefix, parent []int32, cum []bitset, shift int32) spanSet {
	s := spanSet{lo: make([]u128, len(keys)), hi: make([]u128, len(keys)), parent: parent, cum: cum}
	for i, k := range keys {
		s.lo[i], s.hi[i] = span(k)
		if parent[i] >= 0 {
			parent[i] -= shift
		}
	}
	return s
}

// ipLess orders ranges by first address, wider ranges first, so that every
// range containing an address is an ancestor-or-self of the last range
// starting at or before it (ranges are laminar: they nest or are disjoint).
func ipLess(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
