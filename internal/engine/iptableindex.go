package engine

import (
	"math/bits"
	"unsafe"
)

// minIndexed is the number of intervals from which a table gets a bucket
// index: below it, bisecting the whole table touches few cache lines.
const minIndexed = 16

// intKey is a key held as a plain integer.
type intKey[T any] interface {
	key32 | key64
	key[T]
}

// indexed is sorted disjoint intervals with a bucket index over their
// starts. Bisecting a million intervals touches about twenty cache lines
// spread over megabytes, each a likely miss for addresses that vary (1 µs
// a lookup, measured); the index maps the address's bucket (its bits below
// the table's common top bits) to the few intervals starting there, so a
// lookup is one index read and a bisection of a cache line or two. The
// index has at most one entry (4 bytes) per interval.
type indexed[T intKey[T]] struct {
	s     []interval[T]
	base  T     // s[0].lo
	shift uint8 // bucket of a = (a-base) >> shift
	// first[b] is the first interval starting in bucket b or after it;
	// the intervals of bucket b are s[first[b]:first[b+1]].
	first []uint32
}

// newIndexed indexes s, sorted disjoint intervals it then holds.
func newIndexed[T intKey[T]](s []interval[T]) indexed[T] {
	if len(s) < minIndexed {
		return indexed[T]{s: s}
	}
	base := s[0].lo
	width := uint64(s[len(s)-1].lo - base)
	shift := max(bits.Len64(width)-(bits.Len(uint(len(s)))-1), 0)
	buckets := int(width>>shift) + 1 // ≤ len(s)
	first := make([]uint32, buckets+1)
	j := 0
	for b := range first {
		for j < len(s) && uint64(s[j].lo-base)>>shift < uint64(b) {
			j++
		}
		first[b] = uint32(j)
	}
	return indexed[T]{s: s, base: base, shift: uint8(shift), first: first}
}

// contains reports whether a is in one of the intervals. T is a plain
// integer here, so comparisons compile to instructions, not calls through
// the generic dictionary: this is the decision path.
func (x *indexed[T]) contains(a T) bool {
	s, lo, hi := x.s, 0, len(x.s)
	if x.first != nil {
		if a < x.base {
			return false
		}
		if b := uint64(a-x.base) >> x.shift; b+1 < uint64(len(x.first)) {
			lo, hi = int(x.first[b]), int(x.first[b+1])
		} else {
			lo = hi // a is after every start: only the last interval can hold it
		}
	}
	// Every interval before s[lo] starts at or before a, every one from
	// s[hi] after it; find the last one starting at or before a.
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a < s[m].lo {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo > 0 && a <= s[lo-1].hi
}

// with is x with add's intervals added; x is shared, never written, and
// returned as it is when there is nothing to add.
func (x indexed[T]) with(add []interval[T]) indexed[T] {
	if len(add) == 0 {
		return x
	}
	return newIndexed(unionOf(x.s, add))
}

// bytes is the memory x's arrays hold.
func (x *indexed[T]) bytes() int64 {
	return int64(cap(x.s))*int64(unsafe.Sizeof(interval[T]{})) + int64(cap(x.first))*4
}
