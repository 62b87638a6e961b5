// Package listgen generates the large IP lists that tests, benchmarks and
// tools/benchref feed to the engine, the git source and whole clusters:
// generated, never committed. Every list is deterministic (a PCG seeded by
// the caller), so a benchmark measures the same bytes on every run and a
// failing test can be rerun on the same data.
//
// Three shapes cover what the callers need:
//   - Mixed: an abuse feed, half IPv4 (/16-/32) and half IPv6 (/32-/64)
//     with random prefix lengths, so the prefix table is irregular;
//   - Dense: /24s (and, every so often, IPv6 /48s) drawn from one random
//     number each, poorly compressible like a real list in git;
//   - Sequential: 10.x.y.0/24 in order, very regular, for when the content
//     does not matter but its size does.
package listgen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Mixed describes an abuse feed: each entry is IPv4 or IPv6 with even
// odds, its address and prefix length drawn at random (so an address may
// carry host bits past its prefix, as in real feeds).
type Mixed struct {
	// Seed picks the list (the PCG is seeded with Seed, 3).
	Seed uint64
	// V4First are the first octets IPv4 entries are drawn from, evenly;
	// nil is 1-222 (unicast, any block).
	V4First []int
	// V6Second are the second bytes of IPv6 entries (2aXX::), drawn
	// evenly; nil is 0x00-0xff.
	V6Second []int
}

// Write writes n entries, one a line.
func (m Mixed) Write(w io.Writer, n int) error {
	v4, v6 := m.V4First, m.V6Second
	if v4 == nil {
		v4 = Range(1, 222)
	}
	if v6 == nil {
		v6 = Range(0, 0xff)
	}
	r := rand.New(rand.NewPCG(m.Seed, 3))
	bw := bufio.NewWriter(w)
	for range n {
		if r.IntN(2) == 0 {
			fmt.Fprintf(bw, "%d.%d.%d.%d/%d\n", v4[r.IntN(len(v4))], r.IntN(256), r.IntN(256), r.IntN(256), 16+r.IntN(17))
		} else {
			fmt.Fprintf(bw, "2a%02x:%x:%x::/%d\n", v6[r.IntN(len(v6))], r.IntN(1<<16), r.IntN(1<<16), 32+r.IntN(33))
		}
	}
	return bw.Flush()
}

// Bytes is the list of n entries (about 20 bytes each).
func (m Mixed) Bytes(n int) []byte { return []byte(text(m, n)) }

// Text is Bytes as a string.
func (m Mixed) Text(n int) string { return text(m, n) }

// Dense describes a list of IPv4 /24s in 11-190.x.x.0/24 (outside the
// documentation ranges tests use for their own addresses: 192.0.2.0/24,
// 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32), one random number
// each. Entry i is an IPv6 /48 in 2a00-2ac7::/16 instead when V6Every > 0
// and i%V6Every == 0.
type Dense struct {
	// Seed picks the list (the PCG is seeded with Seed, 1).
	Seed uint64
	// V6Every makes every V6Every-th entry IPv6 (0: none).
	V6Every int
	// Fixed are the list's first entries, as given. Generated entries
	// follow them and keep their numbering: the first is entry
	// len(Fixed), IPv4 or IPv6 by that number (it still takes the
	// first random number).
	Fixed []string
}

// Write writes n entries, one a line (Fixed first, when n allows).
func (d Dense) Write(w io.Writer, n int) error {
	bw := bufio.NewWriter(w)
	for _, e := range d.Fixed[:min(n, len(d.Fixed))] {
		bw.WriteString(e + "\n")
	}
	r := rand.New(rand.NewPCG(d.Seed, 1))
	for i := len(d.Fixed); i < n; i++ {
		v := r.Uint64()
		if d.V6Every > 0 && i%d.V6Every == 0 {
			fmt.Fprintf(bw, "2a%02x:%x:%x::/48\n", v%200, v>>8&0xffff, v>>24&0xffff)
			continue
		}
		fmt.Fprintf(bw, "%d.%d.%d.0/24\n", 11+v%180, v>>8&255, v>>16&255)
	}
	return bw.Flush()
}

// Text is the list of n entries (about 16 bytes each).
func (d Dense) Text(n int) string { return text(d, n) }

// text is what l writes for n entries.
func text(l interface{ Write(io.Writer, int) error }, n int) string {
	var b strings.Builder
	b.Grow(n * 20)
	_ = l.Write(&b, n) // a strings.Builder does not fail
	return b.String()
}

// Sequential is n entries 10.0.0.0/24, 10.0.1.0/24, ... (about 14 bytes
// each); past 65,536 entries the /24s repeat.
func Sequential(n int) string {
	var b strings.Builder
	b.Grow(n * 14)
	for i := range n {
		fmt.Fprintf(&b, "10.%d.%d.0/24\n", i>>8&255, i&255)
	}
	return b.String()
}

// Range is lo, lo+1, ..., hi: a set of octets for Mixed.
func Range(lo, hi int) []int {
	s := make([]int, 0, hi-lo+1)
	for o := lo; o <= hi; o++ {
		s = append(s, o)
	}
	return s
}
