package engine

import "math/bits"

// bitset holds one bit per rule position, in evaluation order, behind a
// summary with one bit per non-zero word: [summary words | words]. The
// cursor visits only words non-zero in every set, so a request whose
// candidates are few touches a few words, not n/64. set and or keep the
// summary exact (the summary of a|b is the summaries' |).
type bitset []uint64

// layout returns the summary and word counts for n rules.
func layout(n int) (sums, words int) {
	words = (n + 63) / 64
	return (words + 63) / 64, words
}

func newBitset(n int) bitset {
	s, w := layout(n)
	return make(bitset, s+w)
}

// sums is the length of the summary: len = w + ceil(w/64) inverts to it.
func (b bitset) sums() int { return (len(b) + 64) / 65 }

func (b bitset) set(i int) {
	s, w := b.sums(), i/64
	b[s+w] |= 1 << (uint(i) % 64)
	b[w/64] |= 1 << (uint(w) % 64)
}

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
	n, sums int
	// free[f] holds the rules with no constraint on field f: they stay
	// candidates whatever the field's value. Every set a lookup returns
	// includes them (foldFree), and a lookup that finds nothing returns free.
	free   [numFields]bitset
	values [2]map[string]bitset // fieldMethod, fieldHost: value -> rules
	paths  prefixSet
	ips    rangeSet
	strict bitset // rules whose IP test errors when source_ip is not strict
	exact  bitset // rules the index decides alone (compiledRule.exact)
	none   bitset // all zero: the strict term when source_ip parses strictly
}

// buildIndex indexes the constraints of each rule, given in rule order.
func buildIndex(cons [][]constraint, rules []compiledRule) *ruleIndex {
	n := len(cons)
	ix := &ruleIndex{n: n, none: newBitset(n), strict: newBitset(n), exact: newBitset(n)}
	ix.sums, _ = layout(n)
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
	ix.foldFree()
	return ix
}

// foldFree adds each field's unconstrained rules to every set a lookup of
// that field can return, so that a candidate word costs four loads and
// ANDs instead of eight.
func (ix *ruleIndex) foldFree() {
	for f, m := range ix.values {
		for _, s := range m {
			s.or(ix.free[f])
		}
	}
	for _, s := range ix.paths.cum {
		s.or(ix.free[fieldPath])
	}
	for _, fam := range []*spanSet{&ix.ips.v4, &ix.ips.v6} {
		for _, s := range fam.cum {
			s.or(ix.free[fieldIP])
		}
	}
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
	sum                int    // current summary word
	sumBits            uint64 // its candidate words not yet visited
	word               int    // current word
	cur                uint64 // its candidate rules not yet returned
}

// candidates prepares the walk for req.
func (ix *ruleIndex) candidates(req *Request) cursor {
	c := cursor{ix: ix, sum: -1, strict: ix.none}
	c.method = ix.lookupExact(fieldMethod, req.Method)
	c.host = ix.lookupExact(fieldHost, req.Host)
	c.path = ix.paths.lookup(req.Path, ix.free[fieldPath])
	c.ip = ix.free[fieldIP]
	addr, lenient, strict := parseIP(req.SourceIP)
	if lenient {
		c.ip = ix.ips.lookup(addr, ix.free[fieldIP])
	}
	// containsIP errors on what ip() refuses; an error is not "false", so
	// those rules stay candidates and CEL reports the error.
	if !strict {
		c.strict = ix.strict
	}
	return c
}

func (ix *ruleIndex) lookupExact(f field, v string) bitset {
	if s, ok := ix.values[f][v]; ok {
		return s
	}
	return ix.free[f]
}

// next returns the next candidate rule position, or -1.
func (c *cursor) next() int {
	for c.cur == 0 {
		for c.sumBits == 0 {
			c.sum++
			if c.sum >= c.ix.sums {
				return -1
			}
			k := c.sum
			c.sumBits = c.method[k] & c.host[k] & c.path[k] & (c.ip[k] | c.strict[k])
		}
		c.word = c.sum*64 + bits.TrailingZeros64(c.sumBits)
		c.sumBits &= c.sumBits - 1
		w := c.ix.sums + c.word
		c.cur = c.method[w] & c.host[w] & c.path[w] & (c.ip[w] | c.strict[w])
	}
	b := bits.TrailingZeros64(c.cur)
	c.cur &= c.cur - 1
	return c.word*64 + b
}

// known reports that candidate i was found by the lookups of all its
// constrained fields, so its constraints hold if they are exact. It is
// false for a rule with a strict IP test when source_ip does not parse
// strictly: that test may then be an error whatever the lookup found.
func (c *cursor) known(i int) bool {
	return c.strict[c.ix.sums+i/64]&(1<<(uint(i)%64)) == 0
}

// decided reports that candidate i matches without evaluating it: an exact
// rule whose constraints the lookups found true.
func (c *cursor) decided(i int) bool {
	return c.ix.exact[c.ix.sums+i/64]&(1<<(uint(i)%64)) != 0 && c.known(i)
}
