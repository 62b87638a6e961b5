package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

func ipList(file, data string) *policy.List {
	n := 0
	_ = policy.EachEntry([]byte(data), policy.ListIP, func(int, string) error { n++; return nil })
	return &policy.List{Name: "x", File: file, Kind: policy.ListIP, Hash: policy.ContentHash([]byte(data)), Entries: n, Data: []byte(data)}
}

// TestDeriveListEqualsAFreshCompile: a list derived from its previous
// content holds exactly the addresses a fresh compile of the new content
// does, removals included (a removed line's addresses may still be on
// another line, as the same prefix, a wider one or narrower ones).
func TestDeriveListEqualsAFreshCompile(t *testing.T) {
	t.Parallel()
	const old = "# blocklist\n10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n10.0.0.0/8\n"
	for _, c := range []struct {
		name, old, new string
		derived        bool
	}{
		{"append", old, old + "198.51.100.0/24\n", true},
		{"insert in the middle", old, "# blocklist\n10.0.0.0/8\n198.51.100.7\n192.0.2.0/24\n2001:db8::/32\n10.0.0.0/8\n", true},
		{"prepend", old, "203.0.113.0/24\n" + old, true},
		{"comment added", old, old + "# done\n", true},
		{"append after a last line without newline", "10.0.0.0/8", "10.0.0.0/8\n11.0.0.0/8\n", true},
		{"duplicate removed", old, "# blocklist\n10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n", true},
		{"line rewritten", old, "# blocklist\n10.0.0.0/8\n192.0.2.0/25\n2001:db8::/32\n10.0.0.0/8\n", true},
		{"entry removed", old, "# blocklist\n10.0.0.0/8\n2001:db8::/32\n10.0.0.0/8\n", true},
		{"wider entry removed, narrower kept", "10.0.0.0/8\n10.1.0.0/16\n10.3.0.0/16\n", "10.1.0.0/16\n10.3.0.0/16\n", true},
		{"IPv6 /128 removed inside a kept /48", "2001:db8::/48\n2001:db8::1\n2001:db8:1::1\n", "2001:db8::/48\n2001:db8:1::2\n", true},
		{"malformed addition", old, old + "not-an-ip\n", false},
		{"identical prefix bytes across lines", "1.1.1.0/24\n1.1.1.1\n", "1.1.1.0/24\n1.1.1.1\n1.1.1.1\n", true},
	} {
		base, err := compileList(ipList("_lists/x.netset", c.old))
		if err != nil {
			t.Fatal(err)
		}
		next := ipList("_lists/x.netset", c.new)
		d := deriveList(base, next)
		if (d != nil) != c.derived {
			t.Errorf("%s: derived %v, want %v", c.name, d != nil, c.derived)
		}
		if d == nil {
			continue
		}
		fresh, err := compileList(next)
		if err != nil {
			t.Fatal(err)
		}
		if !d.ips.equal(fresh.ips) || d.entries != fresh.entries {
			t.Errorf("%s: derived table differs from a fresh compile", c.name)
		}
		if b2, _ := compileList(ipList("_lists/x.netset", c.old)); !base.ips.equal(b2.ips) {
			t.Errorf("%s: deriving changed the base table", c.name)
		}
	}
}

// TestDeriveRandomEditsEqualsAFreshCompile: random removals, additions
// and rewrites of nested, overlapping and duplicate entries, derived from
// the previous content, hold what a fresh compile does.
func TestDeriveRandomEditsEqualsAFreshCompile(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 21))
		var lines []string
		for range 200 {
			lines = append(lines, randomPrefix(r).String())
		}
		base, err := compileList(ipList("_lists/edits.netset", strings.Join(lines, "\n")+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		for range 1 + r.IntN(8) {
			i := r.IntN(len(lines))
			switch r.IntN(3) {
			case 0:
				lines = append(lines[:i], lines[i+1:]...)
			case 1:
				lines[i] = randomPrefix(r).String()
			default:
				lines = append(lines[:i], append([]string{randomPrefix(r).String()}, lines[i:]...)...)
			}
		}
		next := ipList("_lists/edits.netset", strings.Join(lines, "\n")+"\n")
		d := deriveList(base, next)
		fresh, err := compileList(next)
		if err != nil {
			t.Fatal(err)
		}
		if d == nil || !d.ips.equal(fresh.ips) {
			t.Fatalf("seed %d: derived %v, not the table of a fresh compile", seed, d != nil)
		}
	}
}

// TestListCacheDerivesAnAppendedLine: the cache compiles a new content of
// a list file it holds by deriving it, and the result decides as the new
// content says.
func TestListCacheDerivesAnAppendedLine(t *testing.T) {
	t.Parallel()
	old := string(bigList(10_000, 11))
	a := ipList("_lists/derive-test.netset", old)
	base, err := lists.get(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := listDerives.Load()
	b := ipList("_lists/derive-test.netset", old+"198.51.100.0/24\n")
	got, err := lists.get(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if listDerives.Load() == before {
		t.Error("a one-line append was compiled afresh, not derived")
	}
	if !got.containsIP("198.51.100.9") || base.containsIP("198.51.100.9") {
		t.Error("the derived list does not hold the appended line, or the base changed")
	}
}

// BenchmarkOneLineChangeMillionEntryList is what a node pays for a
// one-line change to a 1,000,000-entry list: "fresh" compiles the new
// content whole (as every node did before), "derived" derives it from the
// compiled previous content. Compare the two from the same run.
func BenchmarkOneLineChangeMillionEntryList(b *testing.B) {
	old := bigList(1_000_000, 1)
	base, err := compileList(ipList("_lists/abuse.netset", string(old)))
	if err != nil {
		b.Fatal(err)
	}
	next := ipList("_lists/abuse.netset", string(old)+"198.51.100.0/24\n")
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			if _, err := compileList(next); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("derived", func(b *testing.B) {
		for b.Loop() {
			if deriveList(base, next) == nil {
				b.Fatal("not derived")
			}
		}
	})
	// A line removed from the middle: the new content is scanned once for
	// entries overlapping the removed one.
	i := len(old) / 2
	i += bytes.IndexByte(old[i:], '\n') + 1
	j := i + bytes.IndexByte(old[i:], '\n') + 1
	cut := ipList("_lists/abuse.netset", string(old[:i])+string(old[j:]))
	b.Run("derived-removal", func(b *testing.B) {
		for b.Loop() {
			if deriveList(base, cut) == nil {
				b.Fatal("not derived")
			}
		}
	})
}

// TestListCacheDerivesFromAnOlderContent: a branch's content of a list
// (the last compiled) is not what main's next content extends; the cache
// still derives main's from main's previous content.
func TestListCacheDerivesFromAnOlderContent(t *testing.T) {
	t.Parallel()
	old := string(bigList(10_000, 13))
	var branch strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&branch, "198.18.%d.%d/32\n", i/250, i%250)
	}
	var held []*compiledList
	for _, data := range []string{old, old + branch.String()} {
		cl, err := lists.get(ipList("_lists/older-base.netset", data), nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, cl)
	}
	before := listDerives.Load()
	got, err := lists.get(ipList("_lists/older-base.netset", old+"198.51.100.0/24\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if listDerives.Load() == before {
		t.Error("main's one-line append was compiled afresh, not derived from main's previous content")
	}
	if !got.containsIP("198.51.100.9") || got.containsIP("198.18.0.1") {
		t.Error("the derived list does not hold exactly main's content")
	}
	runtime.KeepAlive(held)
}
