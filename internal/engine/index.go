package engine

import (
	"maps"
	"math/bits"
	"net/netip"
	"slices"
)

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

// has reports whether rule i is in the set.
func (b bitset) has(i int) bool {
	return b[b.sums()+i/64]&(1<<(uint(i)%64)) != 0
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
	// Headers have their own per name (headerBuilder.build).
	free    [numFields]bitset
	values  [2]valueSets         // fieldMethod, fieldHost: value -> rules
	maps    [2]map[string]bitset // values while building
	paths   prefixSet
	ips     rangeSet
	hasIP   bool          // some rule has an IP constraint
	headers []headerIndex // one per header name some rule tests, sorted by name
	// headerPos: header name -> position in headers, so that a request with
	// a few headers is matched by looking its names up (containers).
	headerPos map[string]int
	// absentT and unguardedT combine the absent (AND) and unguarded (OR)
	// sets of runs of header names (hdrrange.go).
	absentT, unguardedT rangeTable
	groups              map[string]bitset // group -> rules requiring it or one of others
	gcon                bitset            // rules with a group constraint
	// containerRules: rules with a header or group constraint, whose
	// candidacy the cursor decides only once the lookups are made.
	containerRules bitset
	strict         bitset       // rules whose IP test errors when source_ip is not strict
	ipExtra        [2][2]bitset // OR'd into the IP term: [!strict address][groups too many]
	exact          bitset       // rules the index decides alone (compiledRule.exact)
	none           bitset       // all zero
	all            bitset       // every rule
}

// headerIndex holds the constraints on one header name. Every set
// includes the rules without one (free).
type headerIndex struct {
	name string
	// values: value -> the rules allowing it (and presence-only rules);
	// present: the rules that hold when the header has an unlisted value.
	values  valueSets
	present bitset
	// absent: the rules that stay candidates without the header: free and
	// unguarded, whose value test is then an error, not false.
	absent    bitset
	unguarded bitset
}

// buildIndex indexes the constraints of each rule, given in rule order.
func buildIndex(cons [][]constraint, rules []compiledRule) *ruleIndex {
	n := len(cons)
	ix := &ruleIndex{n: n, none: newBitset(n), all: newBitset(n), strict: newBitset(n), exact: newBitset(n),
		gcon: newBitset(n), groups: map[string]bitset{}}
	ix.sums, _ = layout(n)
	for f := range ix.free {
		ix.free[f] = newBitset(n)
	}
	ix.maps = [2]map[string]bitset{{}, {}}
	pb, rb := newPrefixBuilder(n), newRangeBuilder(n)
	hb := map[string]*headerBuilder{}
	for i, cs := range cons {
		ix.all.set(i)
		if rules[i].exact {
			ix.exact.set(i)
		}
		var has [numFields]bool
		for _, c := range cs {
			has[c.field] = true
			ix.add(i, c, pb, rb, hb)
		}
		for f, h := range has {
			if !h {
				ix.free[f].set(i)
			}
		}
	}
	ix.paths, ix.ips = buildPrefixSet(pb), buildRangeSet(rb)
	ix.hasIP = len(ix.ips.v4.lo)+len(ix.ips.v6.lo) > 0
	ix.containerRules = slices.Clone(ix.gcon)
	for _, name := range slices.Sorted(maps.Keys(hb)) {
		ix.containerRules.or(hb[name].con)
		ix.headers = append(ix.headers, hb[name].build(ix))
	}
	ix.headerPos = make(map[string]int, len(ix.headers))
	absent, unguarded := make([]bitset, len(ix.headers)), make([]bitset, len(ix.headers))
	for i, h := range ix.headers {
		ix.headerPos[h.name] = i
		absent[i], unguarded[i] = h.absent, h.unguarded
	}
	ix.absentT, ix.unguardedT = newRangeTable(absent, true, ix.canon), newRangeTable(unguarded, false, ix.canon)
	ix.foldFree()
	for f, m := range ix.maps {
		ix.values[f] = newValueSets(m)
	}
	ix.maps = [2]map[string]bitset{}
	ix.strict, ix.gcon = ix.canon(ix.strict), ix.canon(ix.gcon)
	for s, strict := range []bitset{ix.none, ix.strict} {
		for g, gcon := range []bitset{ix.none, ix.gcon} {
			ix.ipExtra[s][g] = slices.Clone(strict)
			ix.ipExtra[s][g].or(gcon)
		}
	}
	return ix
}

// canon returns none or all for a set equal to them, so that combiner
// recognises the sets that change nothing.
func (ix *ruleIndex) canon(s bitset) bitset {
	switch {
	case slices.Equal(s, ix.none):
		return ix.none
	case slices.Equal(s, ix.all):
		return ix.all
	}
	return s
}

// headerBuilder collects the constraints on one header name.
type headerBuilder struct {
	name      string
	con       bitset            // rules with a constraint on the header
	anyValue  bitset            // presence tests alone
	unguarded bitset            // value tests without a presence test
	values    map[string]bitset // value -> rules with a value test allowing it
}

func (h *headerBuilder) build(ix *ruleIndex) headerIndex {
	free := newBitset(ix.n)
	for i := range ix.n {
		if !h.con.has(i) {
			free.set(i)
		}
	}
	out := headerIndex{name: h.name, present: slices.Clone(free), absent: free}
	out.present.or(h.anyValue)
	for v, s := range h.values {
		s.or(out.present)
		h.values[v] = ix.canon(s)
	}
	out.values = newValueSets(h.values)
	out.absent.or(h.unguarded)
	out.present, out.absent, out.unguarded = ix.canon(out.present), ix.canon(out.absent), ix.canon(h.unguarded)
	return out
}

// foldFree adds each field's unconstrained rules to every set a lookup of
// that field can return, so that a candidate word costs a few loads and
// ANDs instead of twice as many.
func (ix *ruleIndex) foldFree() {
	for f, m := range ix.maps {
		for _, s := range m {
			s.or(ix.free[f])
		}
	}
	// Path and IP lookups start from free (chainSet).
	for _, s := range ix.groups {
		s.or(ix.free[fieldGroups])
	}
}

func (ix *ruleIndex) add(i int, c constraint, pb *prefixBuilder, rb *rangeBuilder, hb map[string]*headerBuilder) {
	switch c.field {
	case fieldMethod, fieldHost:
		addValues(ix.maps[c.field], c.values, i, ix.n)
	case fieldPath:
		for _, v := range c.values {
			pb.add(v, i)
		}
	case fieldHeader:
		h := hb[c.header]
		if h == nil {
			h = &headerBuilder{name: c.header, con: newBitset(ix.n), anyValue: newBitset(ix.n),
				unguarded: newBitset(ix.n), values: map[string]bitset{}}
			hb[c.header] = h
		}
		h.con.set(i)
		switch {
		case c.anyValue:
			h.anyValue.set(i)
		case !c.guarded:
			h.unguarded.set(i)
		}
		addValues(h.values, c.values, i, ix.n)
	case fieldGroups:
		ix.gcon.set(i)
		addValues(ix.groups, c.values, i, ix.n)
	case fieldIP:
		for _, p := range c.ranges {
			rb.add(p, i)
		}
		if c.strict {
			ix.strict.set(i)
		}
	}
}

func addValues(m map[string]bitset, values []string, i, n int) {
	for _, v := range values {
		if m[v] == nil {
			m[v] = newBitset(n)
		}
		m[v].set(i)
	}
}

// cursor walks the candidate rules of one request in evaluation order,
// intersecting the per-field sets a word at a time.
type cursor struct {
	ix                 *ruleIndex
	method, host, path bitset
	hdr, grp           bitset // the header and group terms (all until computed)
	ip, ipx            bitset // ipx: rules that are candidates whatever the IP lookup says
	unknown            bitset // candidates whose constraints are not all known true
	sum                int    // current summary word
	sumBits            uint64 // its candidate words not yet visited
	word               int    // current word
	cur                uint64 // its candidate rules not yet returned
	// pending: hdr, grp and unknown still lack the header and group
	// lookups, which are made when a word first holds a rule they concern.
	pending bool
	req     *Request
}

// candidates prepares c, a zero cursor, for the walk of req; ev lends
// scratch space for the path and IP terms. (It is filled in place:
// returning it would copy it.)
func (ix *ruleIndex) candidates(c *cursor, req *Request, ev *evaluation) {
	c.ix, c.sum, c.req, c.pending = ix, -1, req, len(ix.headers)+len(ix.groups) > 0
	c.hdr, c.grp, c.ip, c.ipx, c.unknown = ix.all, ix.all, ix.free[fieldIP], ix.none, ix.none
	c.method = ix.values[fieldMethod].lookup(req.Method, ix.free[fieldMethod])
	c.host = ix.values[fieldHost].lookup(req.Host, ix.free[fieldHost])
	c.path = ix.paths.lookup(req.Path, ix.free[fieldPath], ev)
	strict := true
	if ix.hasIP {
		var addr netip.Addr
		var lenient bool
		addr, lenient, strict = parseIP(req.SourceIP)
		if lenient {
			c.ip = ix.ips.lookup(addr, ix.free[fieldIP], ev)
		}
	}
	// containsIP errors on what ip() refuses; an error is not "false", so
	// those rules stay candidates and CEL reports the error.
	ns, many := 0, 0
	if !strict {
		ns, c.unknown = 1, ix.strict
	}
	// 'g' in request.groups costs the size of the list; beyond the
	// estimate's size it could reach the cost limit, which a skipped rule
	// would not (see DESIGN.md). Such rules then stay candidates whatever
	// the IP lookup says (the group test is evaluated before the IP test)
	// and the group lookup is not used.
	if len(ix.groups) > 0 && len(req.Groups) > EstimatedMaxEntries {
		many = 1
	}
	c.ipx = ix.ipExtra[ns][many]
}

// containers completes the header and group terms of c. A term that needs
// more than one set combines them in scratch space lent by ev (pooled, so
// nothing is allocated once the pool is warm); ev is asked only then.
func (ix *ruleIndex) containers(c *cursor, ev *evaluation) {
	req := c.req
	c.pending = false
	hdr, grp, unknown := combiner{ix: ix}, combiner{ix: ix}, combiner{ix: ix}
	unknown.or(c.unknown, ev)
	// Which indexed headers the request carries: looked up by the
	// request's names when it has fewer than the index (usual: a policy
	// tests dozens of header names, a request carries a handful), else
	// both lists, sorted by name, are walked side by side. The request's
	// names are ascending, as the index's, so found is in index order.
	var found [scanHeaders]foundHeader
	pairs := req.Headers.list
	nf, scan := 0, len(pairs) <= scanHeaders && len(pairs) < len(ix.headers)
	if scan {
		for _, p := range pairs {
			if i, ok := ix.headerPos[p.Name]; ok {
				found[nf] = foundHeader{i, p.Value}
				nf++
			}
		}
	}
	if scan {
		// The names between those the request carries are all missing.
		prev := 0
		for _, f := range found[:nf] {
			ix.absentRange(&hdr, &unknown, prev, f.pos, ev)
			h := &ix.headers[f.pos]
			hdr.and(h.values.lookup(f.value, h.present), ev)
			prev = f.pos + 1
		}
		ix.absentRange(&hdr, &unknown, prev, len(ix.headers), ev)
	} else {
		j := 0
		for i := range ix.headers {
			h := &ix.headers[i]
			for j < len(pairs) && pairs[j].Name < h.name {
				j++
			}
			if j < len(pairs) && pairs[j].Name == h.name {
				hdr.and(h.values.lookup(pairs[j].Value, h.present), ev)
			} else {
				ix.absentRange(&hdr, &unknown, i, i+1, ev)
			}
		}
	}
	switch {
	case len(ix.groups) == 0:
	case len(req.Groups) > EstimatedMaxEntries: // see candidates
		unknown.or(ix.gcon, ev)
	default:
		// Every group's set includes the rules without a group test.
		for _, g := range req.Groups {
			if s, ok := ix.groups[g]; ok {
				grp.or(s, ev)
			}
		}
		c.grp = grp.result(ix.free[fieldGroups])
	}
	c.hdr, c.unknown = hdr.result(ix.all), unknown.result(ix.none)
}

// scanHeaders is the most request headers containers looks up by name.
const scanHeaders = 8

// foundHeader is an indexed header a request carries: its position in
// ruleIndex.headers and the request's value.
type foundHeader struct {
	pos   int
	value string
}

// combiner folds sets into one term, copying only when a second set
// arrives. Sets are immutable index data until copied into scratch from
// ev. (ev is an argument rather than a field so that escape analysis,
// which does not tell fields apart, keeps the evaluation on the stack.)
type combiner struct {
	ix    *ruleIndex
	set   bitset
	owned bool
}

// and intersects: word by word, summaries included (the summary of the
// result may then mark a zero word, which the cursor skips).
func (k *combiner) and(s bitset, ev *evaluation) {
	if same(s, k.ix.all) {
		return
	}
	if k.set == nil {
		k.set = s
		return
	}
	k.own(ev)
	for i := range k.set {
		k.set[i] &= s[i]
	}
}

// or unites; summaries stay exact.
func (k *combiner) or(s bitset, ev *evaluation) {
	if same(s, k.ix.none) || same(s, k.set) {
		return
	}
	if k.set == nil {
		k.set = s
		return
	}
	k.own(ev)
	k.set.or(s)
}

func (k *combiner) own(ev *evaluation) {
	if !k.owned {
		b := ev.scratch(len(k.set))
		copy(b, k.set)
		k.set, k.owned = b, true
	}
}

// same reports that a and b are the same set (not merely equal). With no
// rules every set is empty, and then they are all alike anyway.
func same(a, b bitset) bool {
	return len(a) == 0 || len(b) > 0 && &a[0] == &b[0]
}

func (k *combiner) result(empty bitset) bitset {
	if k.set == nil {
		return empty
	}
	return k.set
}

// valueSets maps values to sets: by a scan when there are few, which is
// cheaper than hashing, else by a map.
type valueSets struct {
	keys []string
	sets []bitset
	m    map[string]bitset
}

const maxScannedValues = 8

func newValueSets(m map[string]bitset) valueSets {
	if len(m) > maxScannedValues {
		return valueSets{m: m}
	}
	var v valueSets
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v.keys, v.sets = append(v.keys, k), append(v.sets, m[k])
	}
	return v
}

// lookup returns the set of value s, or dflt.
func (v *valueSets) lookup(s string, dflt bitset) bitset {
	if v.m != nil {
		if b, ok := v.m[s]; ok {
			return b
		}
		return dflt
	}
	for i, k := range v.keys {
		if k == s {
			return v.sets[i]
		}
	}
	return dflt
}

// next returns the next candidate rule position, or -1. ev lends scratch
// space (see containers); it is not kept in the cursor, which would make
// escape analysis move the evaluation to the heap.
func (c *cursor) next(ev *evaluation) int {
	for c.cur == 0 {
		for c.sumBits == 0 {
			c.sum++
			if c.sum >= c.ix.sums {
				return -1
			}
			k := c.sum
			c.sumBits = c.method[k] & c.host[k] & c.path[k] & c.hdr[k] & c.grp[k] & (c.ip[k] | c.ipx[k])
		}
		c.word = c.sum*64 + bits.TrailingZeros64(c.sumBits)
		c.sumBits &= c.sumBits - 1
		w := c.ix.sums + c.word
		c.cur = c.method[w] & c.host[w] & c.path[w] & c.hdr[w] & c.grp[w] & (c.ip[w] | c.ipx[w])
		if c.pending && c.cur&c.ix.containerRules[w] != 0 {
			c.ix.containers(c, ev)
			c.cur &= c.hdr[w] & c.grp[w]
		}
	}
	b := bits.TrailingZeros64(c.cur)
	c.cur &= c.cur - 1
	return c.word*64 + b
}

// known reports that candidate i was found by the lookups of all its
// constrained fields, so its constraints hold if they are exact. It is
// false for a rule with a strict IP test when source_ip does not parse
// strictly (that test may then be an error whatever the lookup found), for
// an unguarded header test when the header is missing (an error), and for
// a group test when the request has more groups than the estimate.
func (c *cursor) known(i int) bool {
	return c.unknown[c.ix.sums+i/64]&(1<<(uint(i)%64)) == 0
}

// decided reports that candidate i matches without evaluating it: an exact
// rule whose constraints the lookups found true.
func (c *cursor) decided(i int) bool {
	return c.ix.exact[c.ix.sums+i/64]&(1<<(uint(i)%64)) != 0 && c.known(i)
}
