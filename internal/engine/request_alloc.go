package engine

import "slices"

// One allocation for a decoded request and its pairs.
//
// The fast decoder collects the entries of query and headers on the stack
// and, once the body is decoded, allocates the Request together with room
// for exactly those entries (rounded up to the next of a few sizes), where
// a Request and two lists were three allocations. The lists point into the
// same object as the Request, so they keep it alive and it them: what one
// keeps of a decoded request, it keeps whole, as the recorder and the
// preview queue do. Nothing is pooled: the request's owner is whoever
// holds it last.

// pairBuf is the entries of query and headers of the body being decoded:
// on the stack up to its array, in spill (on the heap) beyond.
type pairBuf struct {
	stack [2 * maxFastPairs]Pair
	n     int
	spill []Pair // every entry, once there are more than stack holds
}

// pairSpan is where the entries of one field are in a pairBuf; present is
// false when the body has no such field.
type pairSpan struct {
	start, end int
	present    bool
}

func (b *pairBuf) add(p Pair) {
	if b.spill == nil && b.n < len(b.stack) {
		b.stack[b.n] = p
		b.n++
		return
	}
	if b.spill == nil {
		b.spill = append(make([]Pair, 0, 2*len(b.stack)), b.stack[:b.n]...)
	}
	b.spill = append(b.spill, p)
	b.n++
}

// list is the entries so far; it is valid until the next add.
func (b *pairBuf) list() []Pair {
	if b.spill != nil {
		return b.spill
	}
	return b.stack[:b.n]
}

// truncate drops the entries from n on.
func (b *pairBuf) truncate(n int) {
	b.n = n
	if b.spill != nil {
		b.spill = b.spill[:n]
	}
}

// newRequest returns a copy of r on the heap with its query and headers,
// the entries of spans q and h, in the same allocation.
func (b *pairBuf) newRequest(r *Request, q, h pairSpan) *Request {
	var req *Request
	var slab []Pair
	if b.spill != nil {
		// Copied to its size: the spill grew by doubling and holds every
		// entry read, a repeated name's too, where the fields keep the
		// last of each (a body repeating one query name 280 times pinned
		// 16 KiB behind one entry, which the recorder counts as 32 bytes).
		req, slab = new(Request), slices.Clone(b.spill[:b.n])
	} else {
		req, slab = newRequestWith(b.n)
		slab = append(slab, b.stack[:b.n]...)
	}
	*req = *r
	req.Query, req.Headers = q.of(slab), h.of(slab)
	return req
}

// of returns the entries of s in slab; an empty field is present with
// none (a zero-length slice allocates nothing).
func (s pairSpan) of(slab []Pair) Pairs {
	switch {
	case !s.present:
		return Pairs{}
	case s.start == s.end:
		return Pairs{list: []Pair{}}
	}
	return Pairs{list: slab[s.start:s.end:s.end]}
}

// newRequestWith allocates a Request with room for n pairs after it; the
// slice is empty, of capacity n or a little more.
func newRequestWith(n int) (*Request, []Pair) {
	switch {
	case n == 0:
		return new(Request), nil
	case n <= 2:
		return requestWith(func(a *[2]Pair) []Pair { return a[:0] })
	case n <= 4:
		return requestWith(func(a *[4]Pair) []Pair { return a[:0] })
	case n <= 6:
		return requestWith(func(a *[6]Pair) []Pair { return a[:0] })
	case n <= 8:
		return requestWith(func(a *[8]Pair) []Pair { return a[:0] })
	case n <= 12:
		return requestWith(func(a *[12]Pair) []Pair { return a[:0] })
	case n <= 16:
		return requestWith(func(a *[16]Pair) []Pair { return a[:0] })
	}
	return new(Request), make([]Pair, 0, n)
}

// requestWith allocates a Request and an array A of pairs in one object;
// slice is A's slice expression, which a type parameter over arrays of
// several lengths cannot write itself.
func requestWith[A any](slice func(*A) []Pair) (*Request, []Pair) {
	b := new(struct {
		r Request
		p A
	})
	return &b.r, slice(&b.p)
}
