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
// carries the ids of its own rules only, and a lookup sets those of the
// chain into scratch space over the rules without a constraint (free):
// cost O(log keys + nesting depth + the chain's rules + rules/64), memory
// linear in the (rule, key) pairs. (A union bitset per key answered with
// no copy, but took keys × rules bits: 100,000 one-CIDR rules needed
// gigabytes.)

// prefixSet indexes path prefixes.
type prefixSet struct {
	keys   []string
	parent []int32
	own    [][]int32
}

// lookup returns the rules with a prefix of path, or free.
func (s *prefixSet) lookup(path string, free bitset, ev *evaluation) bitset {
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
			return chainSet(q, s.parent, s.own, free, ev)
		}
	}
	return free
}

// chainSet is free plus the rules of key q and its ancestors, in scratch.
func chainSet(q int32, parent []int32, own [][]int32, free bitset, ev *evaluation) bitset {
	b := ev.scratch(len(free))
	copy(b, free)
	for ; q >= 0; q = parent[q] {
		for _, r := range own[q] {
			b.set(int(r))
		}
	}
	return b
}

// rangeSet indexes IP ranges, one spanSet per family: ranges of different
// families never contain each other, and integer keys make the binary
// search several times cheaper than comparing netip values.
type rangeSet struct {
	v4, v6 spanSet
}

// lookup returns the rules with a range containing a, or free.
func (s *rangeSet) lookup(a netip.Addr, free bitset, ev *evaluation) bitset {
	if a.Is4() {
		return s.v4.lookup(u128From(a), free, ev)
	}
	return s.v6.lookup(u128From(a), free, ev)
}

// spanSet is a prefix set over one family, each range as [lo, hi].
type spanSet struct {
	lo, hi []u128
	parent []int32
	own    [][]int32
}

func (s *spanSet) lookup(a u128, free bitset, ev *evaluation) bitset {
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
			return chainSet(q, s.parent, s.own, free, ev)
		}
	}
	return free
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
// chains; K is string or netip.Prefix.
type nestedBuilder[K comparable] struct {
	n        int
	own      map[K][]int32
	compare  func(a, b K) int
	contains func(outer, inner K) bool
}

type prefixBuilder = nestedBuilder[string]
type rangeBuilder = nestedBuilder[netip.Prefix]

func newPrefixBuilder(n int) *prefixBuilder {
	return &prefixBuilder{n: n, own: map[string][]int32{}, compare: strings.Compare,
		contains: func(outer, inner string) bool { return strings.HasPrefix(inner, outer) }}
}

func newRangeBuilder(n int) *rangeBuilder {
	return &rangeBuilder{n: n, own: map[netip.Prefix][]int32{}, compare: ipLess,
		contains: func(outer, inner netip.Prefix) bool {
			return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
		}}
}

func (b *nestedBuilder[K]) add(k K, rule int) {
	if ids := b.own[k]; len(ids) == 0 || ids[len(ids)-1] != int32(rule) {
		b.own[k] = append(ids, int32(rule))
	}
}

// sorted returns the keys in order with parents found by a stack walk: in
// sorted order a key's ancestors are exactly the stacked keys containing it.
func (b *nestedBuilder[K]) sorted() (keys []K, parent []int32, own [][]int32) {
	for k := range b.own {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, b.compare)
	parent = make([]int32, len(keys))
	own = make([][]int32, len(keys))
	var stack []int32
	for i, k := range keys {
		for len(stack) > 0 && !b.contains(keys[stack[len(stack)-1]], k) {
			stack = stack[:len(stack)-1]
		}
		parent[i] = -1
		own[i] = slices.Clip(b.own[k])
		if len(stack) > 0 {
			parent[i] = stack[len(stack)-1]
		}
		stack = append(stack, int32(i))
	}
	return keys, parent, own
}

func buildPrefixSet(b *prefixBuilder) prefixSet {
	keys, parent, own := b.sorted()
	return prefixSet{keys: keys, parent: parent, own: own}
}

// buildRangeSet splits the sorted ranges by family. IPv4 sorts first and
// no chain crosses families, so the IPv6 part only needs its parents
// shifted.
func buildRangeSet(b *rangeBuilder) rangeSet {
	keys, parent, own := b.sorted()
	n4 := 0
	for n4 < len(keys) && keys[n4].Addr().Is4() {
		n4++
	}
	return rangeSet{v4: newSpanSet(keys[:n4], parent[:n4], own[:n4], 0),
		v6: newSpanSet(keys[n4:], parent[n4:], own[n4:], int32(n4))}
}

func newSpanSet(keys []netip.Prefix, parent []int32, own [][]int32, shift int32) spanSet {
	s := spanSet{lo: make([]u128, len(keys)), hi: make([]u128, len(keys)), parent: parent, own: own}
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
