package engine

import "net/netip"

// minus is t without the addresses of g, each family from its own: g's
// intervals are removed entries, and what else of the list held their
// addresses is added back by the caller (deriveList). t is shared, never
// written; a family g does not touch is shared with the result.
func (t *ipTable) minus(g *ipTable) *ipTable {
	v4, v6 := t.v4, t.v6
	if len(g.v4.s) > 0 {
		v4 = newIndexed(subtractOf(t.v4.s, g.v4.s))
	}
	if len(g.v6.s) > 0 {
		v6 = newIndexed(subtractOf(t.v6.s, g.v6.s))
	}
	return newIPTable(v4, v6, subtractOf(t.v6x, g.v6x))
}

// overlaps reports whether the masked prefix p shares an address with the
// intervals of its own kind (IPv4, IPv6 up to /64, longer IPv6) in t.
func (t *ipTable) overlaps(p netip.Prefix) bool {
	lo, hi := span(p)
	switch {
	case p.Addr().Is4():
		return overlapsIn(t.v4.s, key32(lo.lo), key32(hi.lo))
	case p.Bits() <= 64:
		return overlapsIn(t.v6.s, key64(lo.hi), key64(hi.hi))
	}
	return overlapsIn(t.v6x, lo, hi)
}

func overlapsIn[T key[T]](s []interval[T], lo, hi T) bool {
	i := firstAfter(s, hi) // the intervals from s[i] start after hi
	return i > 0 && !s[i-1].hi.less(lo)
}

// subtractOf is a without the addresses of g, both sorted and disjoint,
// as a new array (a is never written).
func subtractOf[T key[T]](a, g []interval[T]) []interval[T] {
	if len(g) == 0 || len(a) == 0 {
		return a
	}
	out := make([]interval[T], 0, len(a)+len(g))
	j := 0
	for _, y := range a {
		for j < len(g) && g[j].hi.less(y.lo) {
			j++ // g[j] ends before y and every later interval of a
		}
		lo, gone := y.lo, false
		for k := j; k < len(g) && !y.hi.less(g[k].lo); k++ {
			if lo.less(g[k].lo) {
				out = append(out, interval[T]{lo, g[k].lo.pred()})
			}
			if !g[k].hi.less(y.hi) {
				gone = true // g[k] reaches y's end
				break
			}
			lo = g[k].hi.succ()
		}
		if !gone {
			out = append(out, interval[T]{lo, y.hi})
		}
	}
	return out
}
