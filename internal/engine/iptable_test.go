package engine

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/gaissmai/bart"

	"github.com/policyrollout/reconciler/internal/listgen"
	"github.com/policyrollout/reconciler/internal/policy"
)

// randomPrefix is a masked prefix of either family, clustered in a few
// blocks so that prefixes nest, overlap and touch.
func randomPrefix(r *rand.Rand) netip.Prefix {
	if r.IntN(8) == 0 { // anywhere, so the index's buckets span the whole space
		var b [16]byte
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if r.IntN(2) == 0 {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), r.IntN(33)).Masked()
		}
		return netip.PrefixFrom(netip.AddrFrom16(b), r.IntN(129)).Masked()
	}
	if r.IntN(2) == 0 {
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
		return netip.PrefixFrom(a, 14+r.IntN(19)).Masked()
	}
	var b [16]byte
	b[0], b[1], b[2] = 0x20, 0x01, byte(r.IntN(2))
	for i := 3; i < 16; i++ {
		b[i] = byte(r.IntN(4))
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), 16+r.IntN(113)).Masked()
}

// probes are addresses at and beside the ends of every prefix, and the
// ends of both families' address spaces.
func probes(ps []netip.Prefix) []netip.Addr {
	out := []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"),
		netip.MustParseAddr("::"), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")}
	for _, p := range ps {
		first := p.Addr()
		last := netipxLast(p)
		out = append(out, first, first.Prev(), last, last.Next())
	}
	return out
}

// netipxLast is the last address of p.
func netipxLast(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func naiveContains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func tableOf(ps []netip.Prefix) *ipTable {
	var b ipTableBuilder
	for _, p := range ps {
		b.add(p)
	}
	return b.table()
}

// TestIPTableHoldsExactlyItsPrefixes: for random nested, overlapping and
// adjacent prefixes, the table contains an address exactly when some
// prefix does, at every prefix's ends and one address past them; and the
// union of two tables is the table of both prefix sets.
func TestIPTableHoldsExactlyItsPrefixes(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 5))
		var ps, qs []netip.Prefix
		for range 300 {
			ps = append(ps, randomPrefix(r))
		}
		for range 20 {
			qs = append(qs, randomPrefix(r))
		}
		tab, add := tableOf(ps), tableOf(qs)
		both := append(append([]netip.Prefix{}, ps...), qs...)
		u := tab.union(add)
		if !u.equal(tableOf(both)) {
			t.Fatalf("seed %d: the union differs from the table of both sets", seed)
		}
		for _, a := range probes(both) {
			if !a.IsValid() {
				continue
			}
			if got, want := tab.contains(a), naiveContains(ps, a); got != want {
				t.Fatalf("seed %d: contains(%s) = %v, want %v", seed, a, got, want)
			}
			if got, want := u.contains(a), naiveContains(both, a); got != want {
				t.Fatalf("seed %d: union contains(%s) = %v, want %v", seed, a, got, want)
			}
		}
	}
}

// TestIPTableEdges: whole address spaces, the last address of each
// (where the successor wraps), and prefixes that only touch merge into
// one interval.
func TestIPTableEdges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prefixes  string
		intervals int
		in, out   string
	}{
		{"0.0.0.0/0 ::/0", 2, "255.255.255.255 ::ffff:1:2 ffff::1", ""},
		{"255.255.255.255/32 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128 ffff:ffff:ffff:ffff::/64", 3,
			"255.255.255.255 ffff:ffff:ffff:ffff::7 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "255.255.255.254 ffff:ffff:ffff:fffe::1"},
		{"10.0.0.0/25 10.0.0.128/25 10.0.1.0/24 2001:db8::/33 2001:db8:8000::/33", 2, "10.0.0.127 10.0.0.128 10.0.1.255 2001:db8:ffff::1", "10.0.2.0 9.255.255.255 2001:db9::"},
		{"2001:db8::1/128 2001:db8::2/127 2001:db8::/126", 1, "2001:db8::3", "2001:db8::4"},
		{"2001:db8:0:0:8000::/65 2001:db8:0:1::/65", 1, "2001:db8::ffff:ffff:ffff:ffff 2001:db8:0:1::", "2001:db8:0:1:8000::"},
	} {
		checkTable(t, c.prefixes, tableOf(prefixes(t, c.prefixes)), c.intervals, c.in, c.out)
	}
}

// checkTable checks that tab has intervals intervals, holds the addresses
// of in and none of out (space-separated).
func checkTable(t *testing.T, name string, tab *ipTable, intervals int, in, out string) {
	t.Helper()
	if tab.size != intervals {
		t.Errorf("%s: %d intervals, want %d", name, tab.size, intervals)
	}
	for _, a := range strings.Fields(in) {
		if !tab.contains(netip.MustParseAddr(a)) {
			t.Errorf("%s: %s not contained", name, a)
		}
	}
	for _, a := range strings.Fields(out) {
		if tab.contains(netip.MustParseAddr(a)) {
			t.Errorf("%s: %s contained", name, a)
		}
	}
}

// TestIPTableUnionAbsorbsWhatItSpans: an added prefix over several
// intervals of the table, or touching the one before it, merges with them.
func TestIPTableUnionAbsorbsWhatItSpans(t *testing.T) {
	t.Parallel()
	base := tableOf(prefixes(t, "10.0.0.0/24 10.0.2.0/24 10.0.4.0/24 10.0.9.0/24 2001:db8::/48 2001:db8:2::/48"))
	for _, c := range []struct {
		add       string
		intervals int
		in, out   string
	}{
		{"10.0.0.0/22", 4, "10.0.1.7 10.0.4.255", "10.0.5.0"}, // also touches 10.0.4.0/24
		{"10.0.0.0/21", 4, "10.0.7.255", "10.0.8.0"},
		{"10.0.5.0/24 10.0.6.0/23 10.0.8.0/24", 5, "10.0.8.1 10.0.4.0", "10.0.1.0 10.0.3.0 10.0.10.0"},
		{"2001:db8:1::/48", 5, "2001:db8:1::1", "2001:db8:3::"},
	} {
		checkTable(t, "+"+c.add, base.union(tableOf(prefixes(t, c.add))), c.intervals, c.in, c.out)
	}
	if base.size != 6 || !base.contains(netip.MustParseAddr("10.0.9.1")) || base.contains(netip.MustParseAddr("10.0.1.1")) {
		t.Error("a union changed its base")
	}
}

// TestIPTableMinus: removed ranges are cut out of the merged intervals
// exactly, at their ends, in the middle, across intervals, per family.
func TestIPTableMinus(t *testing.T) {
	t.Parallel()
	base := tableOf(prefixes(t, "10.0.0.0/24 10.0.1.0/24 10.0.4.0/22 2001:db8::/47 2001:db8:9::/126"))
	for _, c := range []struct {
		minus     string
		intervals int
		in, out   string
	}{
		{"10.0.0.0/24", 4, "10.0.1.0 10.0.1.255", "10.0.0.255 10.0.0.0"},
		{"10.0.1.0/24", 4, "10.0.0.255", "10.0.1.0 10.0.2.0"},
		{"10.0.5.0/24", 5, "10.0.4.255 10.0.6.0", "10.0.5.0 10.0.5.255"},
		{"10.0.0.0/21", 2, "2001:db8::1", "10.0.0.0 10.0.7.255"},
		{"2001:db8:1::/48 2001:db8:9::1/128", 5, "2001:db8::ffff 2001:db8:9::2 2001:db8:9::", "2001:db8:1:: 2001:db8:9::1"},
		{"192.0.2.0/24", 4, "10.0.0.0", "192.0.2.1"},
	} {
		checkTable(t, "-"+c.minus, base.minus(tableOf(prefixes(t, c.minus))), c.intervals, c.in, c.out)
	}
	checkTable(t, "base", base, 4, "10.0.0.0 10.0.5.5 2001:db8:1::9 2001:db8:9::1", "10.0.2.0")
	// A cut at a boundary of the lower 64 bits borrows from the upper.
	long := tableOf(prefixes(t, "2001:db8:0:0:8000::/65 2001:db8:0:1::/65"))
	checkTable(t, "-/128 at a 64-bit boundary", long.minus(tableOf(prefixes(t, "2001:db8:0:1::/128"))), 2,
		"2001:db8::ffff:ffff:ffff:ffff 2001:db8:0:1::1", "2001:db8:0:1::")
}

func prefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	var ps []netip.Prefix
	for _, f := range strings.Fields(s) {
		ps = append(ps, netip.MustParsePrefix(f))
	}
	return ps
}

// TestMatchedEntryIsTheLongestFirstLine: which entry matched is read from
// the text (the table merged the entries away): the longest prefix
// holding the address, on the first line it is written, with
// IPv4-mapped IPv6 addresses unmapped as inIpList does.
func TestMatchedEntryIsTheLongestFirstLine(t *testing.T) {
	t.Parallel()
	cl, err := compileList(ipList("_lists/m.netset", "# abuse\n10.0.0.0/8\n10.1.0.0/16 # a comment\n10.1.2.3\n2001:db8::/32\n10.1.0.0/16\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ip, entry string
		line      int
	}{
		{"10.1.2.3", "10.1.2.3/32", 4}, {"10.1.9.9", "10.1.0.0/16", 3}, {"::ffff:10.200.0.1", "10.0.0.0/8", 2},
		{"2001:db8::5", "2001:db8::/32", 5}, {"11.0.0.1", "", 0}, {"not an address", "", 0},
	} {
		p, line, ok := cl.matchedEntry(c.ip)
		if got := map[bool]string{true: p.String()}[ok]; got != c.entry || line != c.line {
			t.Errorf("%s: matched %q on line %d, want %q on line %d", c.ip, got, line, c.entry, c.line)
		}
	}
}

// BenchmarkIPListLookup: one lookup in the 1,000,000-entry list, as the
// table this package compiles and as the bart.Lite prefix table it
// replaced (kept here as the yardstick), for a fixed address and for
// addresses drawn from 4,096 (whose paths do not stay in cache).
func BenchmarkIPListLookup(b *testing.B) {
	big := listgen.Mixed{Seed: 1}.Bytes(1_000_000)
	var tb ipTableBuilder
	lite := new(bart.Lite)
	_ = policy.EachEntry(big, policy.ListIP, func(_ int, e string) error {
		p, err := policy.ParseIPEntry(e)
		if err != nil {
			return err
		}
		tb.add(p)
		lite.Insert(p)
		return nil
	})
	tab := tb.table()
	r := rand.New(rand.NewPCG(1, 9))
	addrs := make([]netip.Addr, 4096)
	for i := range addrs {
		if i%2 == 0 {
			addrs[i] = netip.AddrFrom4([4]byte{byte(1 + r.IntN(222)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		} else {
			addrs[i] = netip.AddrFrom16([16]byte{0x2a, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), 7: byte(r.IntN(256))})
		}
	}
	fixed := netip.MustParseAddr("85.214.132.117")
	for _, c := range []struct {
		name string
		has  func(netip.Addr) bool
	}{{"intervals", tab.contains}, {"bart", lite.Contains}} {
		b.Run(c.name+"/fixed", func(b *testing.B) {
			for b.Loop() {
				c.has(fixed)
			}
		})
		b.Run(c.name+"/spread", func(b *testing.B) {
			i := 0
			for b.Loop() {
				c.has(addrs[i&4095])
				i++
			}
		})
	}
}
