package engine

import (
	"net/netip"
	"slices"
	"unsafe"
)

// ipTable is the compiled form of an IP list: its prefixes as sorted,
// disjoint address intervals, searched by bisection within a bucket
// (iptableindex.go). A list only answers "is the address in some entry",
// so overlapping and adjacent entries are merged and the table keeps no
// prefix structure; that is what makes it small. Per interval it holds 8
// bytes for IPv4, 16 for IPv6 prefixes of /64 or shorter (only their upper
// 64 bits vary at the ends) and 32 for longer IPv6 prefixes, plus at most
// 4 bytes of index for the first two kinds: at most 36 bytes an entry,
// against about 54 bytes per entry of a bart.Lite table over a million
// random CIDRs. Which entry matched is found from the list's text instead
// (matchedEntry), for the tools that ask.
//
// An ipTable is immutable once built: a generation, its previous one and
// experiments share it through listCache.
type ipTable struct {
	v4   indexed[key32]
	v6   indexed[key64]   // IPv6 /0 to /64, by the upper 64 bits
	v6x  []interval[u128] // IPv6 /65 to /128: rare, so bisected without an index
	size int              // intervals in all
}

// interval is the addresses from lo to hi, both included.
type interval[T any] struct{ lo, hi T }

// key is an address, or its upper half, as an unsigned integer.
type key[T any] interface {
	comparable
	less(T) bool
	succ() T // the next value; the maximum's wraps, which merging never asks
	pred() T // the previous value; zero's wraps, which subtracting never asks
}

type (
	key32 uint32
	key64 uint64
)

func (a key32) less(b key32) bool { return a < b }
func (a key32) succ() key32       { return a + 1 }
func (a key32) pred() key32       { return a - 1 }
func (a key64) less(b key64) bool { return a < b }
func (a key64) succ() key64       { return a + 1 }
func (a key64) pred() key64       { return a - 1 }

func (a u128) pred() u128 {
	if a.lo == 0 {
		return u128{hi: a.hi - 1, lo: ^uint64(0)}
	}
	return u128{hi: a.hi, lo: a.lo - 1}
}

func (a u128) succ() u128 {
	if a.lo == ^uint64(0) {
		return u128{hi: a.hi + 1}
	}
	return u128{hi: a.hi, lo: a.lo + 1}
}

// ipTableBuilder collects prefixes, unsorted and overlapping, for table.
type ipTableBuilder struct {
	v4  []interval[key32]
	v6  []interval[key64]
	v6x []interval[u128]
}

// add adds the masked prefix p.
func (b *ipTableBuilder) add(p netip.Prefix) {
	lo, hi := span(p)
	switch {
	case p.Addr().Is4():
		b.v4 = append(b.v4, interval[key32]{key32(lo.lo), key32(hi.lo)})
	case p.Bits() <= 64:
		b.v6 = append(b.v6, interval[key64]{key64(lo.hi), key64(hi.hi)})
	default:
		b.v6x = append(b.v6x, interval[u128]{lo, hi})
	}
}

// table sorts and merges what was added; the builder is spent.
func (b *ipTableBuilder) table() *ipTable {
	return newIPTable(newIndexed(normalize(b.v4)), newIndexed(normalize(b.v6)), normalize(b.v6x))
}

func newIPTable(v4 indexed[key32], v6 indexed[key64], v6x []interval[u128]) *ipTable {
	return &ipTable{v4: v4, v6: v6, v6x: v6x, size: len(v4.s) + len(v6.s) + len(v6x)}
}

// union is a table holding the addresses of t and of u, which should be
// the smaller: it costs a copy of t's intervals of each family u adds to;
// the others are shared with t.
func (t *ipTable) union(u *ipTable) *ipTable {
	return newIPTable(t.v4.with(u.v4.s), t.v6.with(u.v6.s), unionOf(t.v6x, u.v6x))
}

// contains reports whether a (unmapped, without zone) is in the table.
func (t *ipTable) contains(a netip.Addr) bool {
	x := u128From(a)
	if a.Is4() {
		return t.v4.contains(key32(x.lo))
	}
	return t.v6.contains(key64(x.hi)) || has128(t.v6x, x)
}

// bytes is the memory the table's arrays hold.
func (t *ipTable) bytes() int64 {
	return t.v4.bytes() + t.v6.bytes() + int64(cap(t.v6x))*int64(unsafe.Sizeof(interval[u128]{}))
}

// equal reports whether t and u hold the same addresses.
func (t *ipTable) equal(u *ipTable) bool {
	return slices.Equal(t.v4.s, u.v4.s) && slices.Equal(t.v6.s, u.v6.s) && slices.Equal(t.v6x, u.v6x)
}

// has128 reports whether a is in one of s, sorted disjoint intervals.
func has128(s []interval[u128], a u128) bool {
	i := firstAfter(s, a)
	return i > 0 && !s[i-1].hi.less(a)
}

// firstAfter is the index of the first of s, sorted by start, starting
// after a (len(s) if none).
func firstAfter[T key[T]](s []interval[T], a T) int {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a.less(s[m].lo) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// normalize sorts s by start and merges it, reusing its array.
func normalize[T key[T]](s []interval[T]) []interval[T] {
	slices.SortFunc(s, func(a, b interval[T]) int {
		switch {
		case a.lo.less(b.lo):
			return -1
		case b.lo.less(a.lo):
			return 1
		}
		return 0
	})
	return coalesce(s)
}

// unionOf is a, sorted disjoint intervals, with the few of b added: a
// bisection and a bulk copy of a per interval of b, so deriving a list
// that gained a line costs a copy of the table, not a pass comparing
// every interval. a is never written; with nothing to add it is shared.
func unionOf[T key[T]](a, b []interval[T]) []interval[T] {
	if len(b) == 0 {
		return a
	}
	out := make([]interval[T], 0, len(a)+len(b))
	for _, x := range b {
		i := firstAfter(a, x.lo)
		out, a = append(out, a[:i]...), a[i:]
		if n := len(out); n > 0 && touches(out[n-1], x) {
			out[n-1].hi = maxKey(out[n-1].hi, x.hi)
		} else {
			out = append(out, x)
		}
		// x may reach over the intervals of a after it.
		for last := &out[len(out)-1]; len(a) > 0 && touches(*last, a[0]); a = a[1:] {
			last.hi = maxKey(last.hi, a[0].hi)
		}
	}
	return append(out, a...)
}

// touches reports whether y, starting at or after x, overlaps x or
// starts right after it.
func touches[T key[T]](x, y interval[T]) bool {
	// !x.hi.less(y.lo) first: when x.hi is the maximum, succ wraps.
	return !x.hi.less(y.lo) || x.hi.succ() == y.lo
}

func maxKey[T key[T]](a, b T) T {
	if a.less(b) {
		return b
	}
	return a
}

// coalesce merges the overlapping and adjacent intervals of s, sorted by
// start, in place. The result is held for a generation's life, so it is
// copied to fit when merging (or append's growth) left much spare room.
func coalesce[T key[T]](s []interval[T]) []interval[T] {
	if len(s) == 0 {
		return nil
	}
	out := s[:1]
	for _, x := range s[1:] {
		if last := &out[len(out)-1]; touches(*last, x) {
			last.hi = maxKey(last.hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	if cap(out)-len(out) > len(out)/16 {
		return slices.Clone(out)
	}
	return out
}
