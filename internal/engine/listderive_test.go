package engine

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/listgen"
	"github.com/policyrollout/reconciler/internal/policy"
)

func ipList(file, data string) *policy.List {
	n := 0
	_ = policy.EachEntry([]byte(data), policy.ListIP, func(int, string) error { n++; return nil })
	return &policy.List{Name: "x", File: file, Kind: policy.ListIP, Hash: policy.ContentHash([]byte(data)), Entries: n, Data: []byte(data)}
}

func strList(file, data string) *policy.List {
	n := 0
	_ = policy.EachEntry([]byte(data), policy.ListString, func(int, string) error { n++; return nil })
	return &policy.List{Name: "x", File: file, Kind: policy.ListString, Hash: policy.ContentHash([]byte(data)), Entries: n, Data: []byte(data)}
}

// TestDeriveListEqualsAFreshCompile: a list derived from its previous
// content holds exactly what a fresh compile of the new content does,
// for additions, removals and rewrites, of IP and string lists alike; a
// removed entry another line still holds stays (a list may hold the same
// prefix twice, or write it twice differently).
func TestDeriveListEqualsAFreshCompile(t *testing.T) {
	t.Parallel()
	const old = "# blocklist\n10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n10.0.0.0/8\n"
	const hosts = "# retired\nold.example\nlegacy.example\nold.example\n"
	for _, c := range []struct {
		name, old, new string
		kind           policy.ListKind
		derived        bool
	}{
		{"append", old, old + "198.51.100.0/24\n", policy.ListIP, true},
		{"insert in the middle", old, "# blocklist\n10.0.0.0/8\n198.51.100.7\n192.0.2.0/24\n2001:db8::/32\n10.0.0.0/8\n", policy.ListIP, true},
		{"prepend", old, "203.0.113.0/24\n" + old, policy.ListIP, true},
		{"comment added", old, old + "# done\n", policy.ListIP, true},
		{"append after a last line without newline", "10.0.0.0/8", "10.0.0.0/8\n11.0.0.0/8\n", policy.ListIP, true},
		{"duplicate removed", old, "# blocklist\n10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n", policy.ListIP, true},
		{"line rewritten", old, "# blocklist\n10.0.0.0/8\n192.0.2.0/25\n2001:db8::/32\n10.0.0.0/8\n", policy.ListIP, true},
		{"entry removed", old, "# blocklist\n10.0.0.0/8\n2001:db8::/32\n10.0.0.0/8\n", policy.ListIP, true},
		{"removed, written otherwise elsewhere", "10.0.0.1/8\n192.0.2.1\n10.0.0.0/8\n", "10.0.0.1/8\n192.0.2.1\n", policy.ListIP, true},
		{"removed, mapped elsewhere", "::ffff:192.0.2.1\n192.0.2.1\n", "::ffff:192.0.2.1\n", policy.ListIP, true},
		{"all removed", old, "# nothing left\n", policy.ListIP, true},
		{"malformed addition", old, old + "not-an-ip\n", policy.ListIP, false},
		{"identical prefix bytes across lines", "1.1.1.0/24\n1.1.1.1\n", "1.1.1.0/24\n1.1.1.1\n1.1.1.1\n", policy.ListIP, true},
		{"host appended", hosts, hosts + "gone.example\n", policy.ListString, true},
		{"host removed", hosts, "# retired\nold.example\nold.example\n", policy.ListString, true},
		{"duplicate host removed", hosts, "# retired\nold.example\nlegacy.example\n", policy.ListString, true},
		{"host rewritten", hosts, "# retired\nold.example\nLegacy.example\nold.example\n", policy.ListString, true},
		{"wider entry removed, narrower kept", "10.0.0.0/8\n10.1.0.0/16\n10.3.0.0/16\n", "10.1.0.0/16\n10.3.0.0/16\n", policy.ListIP, true},
		{"IPv6 /128 removed inside a kept /48", "2001:db8::/48\n2001:db8::1\n2001:db8:1::1\n", "2001:db8::/48\n2001:db8:1::2\n", policy.ListIP, true},
	} {
		list := ipList
		if c.kind == policy.ListString {
			list = strList
		}
		base, err := compileList(list("_lists/x.netset", c.old))
		if err != nil {
			t.Fatal(err)
		}
		next := list("_lists/x.netset", c.new)
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
		if !sameCompiled(d, fresh) {
			t.Errorf("%s: derived list differs from a fresh compile", c.name)
		}
		if b2, _ := compileList(list("_lists/x.netset", c.old)); !sameCompiled(base, b2) {
			t.Errorf("%s: deriving changed the base", c.name)
		}
	}
}

// sameCompiled reports whether two compiled lists hold the same entries.
func sameCompiled(a, b *compiledList) bool {
	if a.kind != b.kind || a.entries != b.entries {
		return false
	}
	if a.kind == policy.ListIP {
		return a.ips.equal(b.ips)
	}
	return maps.Equal(a.strs, b.strs)
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
	old := listgen.Mixed{Seed: 11}.Text(10_000)
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
	old := listgen.Mixed{Seed: 1}.Bytes(1_000_000)
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
	old := listgen.Mixed{Seed: 13}.Text(10_000)
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
