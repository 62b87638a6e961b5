package engine

import (
	"fmt"
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
// content holds exactly the prefixes a fresh compile of the new content
// does, and only additions are derived (a removed line may be a prefix
// the list holds twice).
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
		{"append after a last line without newline", "10.0.0.0/8", "10.0.0.0/8\n11.0.0.0/8\n", false},
		{"duplicate removed", old, "# blocklist\n10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n", false},
		{"line rewritten", old, "# blocklist\n10.0.0.0/8\n192.0.2.0/25\n2001:db8::/32\n10.0.0.0/8\n", false},
		{"entry removed", old, "# blocklist\n10.0.0.0/8\n2001:db8::/32\n10.0.0.0/8\n", false},
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
