package engine

import (
	"math/bits"
	"net/netip"
)

// bitset holds one bit per rule position, in evaluation order.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int) { b[i/64] |= 1 << (uint(i) % 64) }

func (b bitset) or(o bitset) {
	for i := range o {
		b[i] |= o[i]
	}
}

// ruleIndex answers "which rules can possibly match this request?" with a
// few map and binary-search lookups, independent of the number of rules
// except for the bitset width. See DESIGN.md for why skipping the others
// cannot change a decision.
type ruleIndex struct {
	n, words int
	// free[f] holds the rules with no constraint on field f: they stay
	// candidates whatever the field's value.
	free   [numFields]bitset
	values [2]map[string]bitset // fieldMethod, fieldHost: value -> rules
	paths  prefixSet
	ips    rangeSet
	strict bitset // rules whose IP test errors when source_ip is not strict
	exact  bitset // rules the index decides alone (compiledRule.exact)
	none   bitset // all zero, for lookups that find nothing
}

// buildIndex indexes the constraints of each rule, given in rule order.
func buildIndex(cons [][]constraint, rules []compiledRule) *ruleIndex {
	n := len(cons)
	ix := &ruleIndex{n: n, words: (n + 63) / 64, none: newBitset(n), strict: newBitset(n), exact: newBitset(n)}
	for f := range ix.free {
		ix.free[f] = newBitset(n)
	}
	ix.values[fieldMethod] = map[string]bitset{}
	ix.values[fieldHost] = map[string]bitset{}
	pb, rb := newPrefixBuilder(n), newRangeBuilder(n)
	for i, cs := range cons {
		if rules[i].exact {
			ix.exact.set(i)
		}
		var has [numFields]bool
		for _, c := range cs {
			has[c.field] = true
			ix.add(i, c, pb, rb)
		}
		for f, h := range has {
			if !h {
				ix.free[f].set(i)
			}
		}
	}
	ix.paths, ix.ips = buildPrefixSet(pb), buildRangeSet(rb)
	return ix
}

func (ix *ruleIndex) add(i int, c constraint, pb *prefixBuilder, rb *rangeBuilder) {
	switch c.field {
	case fieldMethod, fieldHost:
		m := ix.values[c.field]
		for _, v := range c.values {
			if m[v] == nil {
				m[v] = newBitset(ix.n)
			}
			m[v].set(i)
		}
	case fieldPath:
		for _, v := range c.values {
			pb.add(v, i)
		}
	case fieldIP:
		for _, p := range c.ranges {
			rb.add(p, i)
		}
		if c.strict {
			ix.strict.set(i)
		}
	}
}

// cursor walks the candidate rules of one request in evaluation order,
// intersecting the per-field sets a word at a time so nothing is allocated.
type cursor struct {
	ix                 *ruleIndex
	method, host, path bitset
	ip, strict         bitset
	word               int
	cur                uint64
}

// candidates prepares the walk for req.
func (ix *ruleIndex) candidates(req *Request) cursor {
	c := cursor{ix: ix, word: -1, strict: ix.none}
	c.method = ix.lookupExact(fieldMethod, req.Method)
	c.host = ix.lookupExact(fieldHost, req.Host)
	c.path = ix.paths.lookup(req.Path, ix.none)
	c.ip = ix.none
	if lenient, ok := parseLenientIP(req.SourceIP); ok {
		c.ip = ix.ips.lookup(lenient, ix.none)
	}
	// containsIP errors on what ip() refuses; an error is not "false", so
	// those rules stay candidates and CEL reports the error.
	if _, ok := parseStrictIP(req.SourceIP); !ok {
		c.strict = ix.strict
	}
	return c
}

func (ix *ruleIndex) lookupExact(f field, v string) bitset {
	if s, ok := ix.values[f][v]; ok {
		return s
	}
	return ix.none
}

// next returns the next candidate rule position, or -1.
func (c *cursor) next() int {
	for c.cur == 0 {
		c.word++
		if c.word >= c.ix.words {
			return -1
		}
		c.cur = c.mask(c.word)
	}
	b := bits.TrailingZeros64(c.cur)
	c.cur &= c.cur - 1
	return c.word*64 + b
}

// decided reports that candidate i matches without evaluating it: an exact
// rule found by every lookup, unless its IP test would be an error.
func (c *cursor) decided(i int) bool {
	bit := uint64(1) << (uint(i) % 64)
	return c.ix.exact[i/64]&bit != 0 && c.strict[i/64]&bit == 0
}

func (c *cursor) mask(w int) uint64 {
	f := &c.ix.free
	return (f[fieldMethod][w] | c.method[w]) &
		(f[fieldHost][w] | c.host[w]) &
		(f[fieldPath][w] | c.path[w]) &
		(f[fieldIP][w] | c.ip[w] | c.strict[w])
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
