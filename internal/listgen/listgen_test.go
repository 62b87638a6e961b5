package listgen

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// The lists are pinned: benchmarks compare runs across versions on the
// assumption that they measure the same bytes, so a change to a
// generator must show here (and be said in the change), not silently
// move every benchmark's data.
func TestListsArePinned(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"Mixed{1}", string(Mixed{Seed: 1}.Bytes(1000)),
			"bd2de15497499abdfdad8fd8b8afeadba4376ac8500fe403c8e1376c41703689"},
		{"Mixed{7,ranges}", Mixed{Seed: 7, V4First: Range(40, 44), V6Second: Range(0x10, 0xff)}.Text(1000),
			"b2c6fe62bb678991b2b87b2e3afcf07cb89c76ef900b98e889e4c4a4bd0d15ed"},
		{"Dense{23,4}", Dense{Seed: 23, V6Every: 4}.Text(1000),
			"2d963bc6742aaa763be12037add182bc8bad1ab73ffa5357c2d4fcba7956b11a"},
		{"Dense{23,4,Fixed}", Dense{Seed: 23, V6Every: 4, Fixed: []string{"203.0.113.0/24"}}.Text(1000),
			"143cb88a7704178a4d087d162fce3ea89358426cf61625c93bf99a7be557d877"},
		{"Sequential", Sequential(1000),
			"43fc7e00affd7442bc608234244142f03ee4199e84801115457d2cfa3128ccc0"},
	} {
		if got := fmt.Sprintf("%x", sha256.Sum256([]byte(c.text))); got != c.want {
			t.Errorf("%s: sha256 %s, want %s", c.name, got, c.want)
		}
	}
}

// Every line is a prefix of the family, first octet or byte and length
// asked for; Dense and Sequential ones are networks (no host bits), Mixed
// ones may carry host bits, as feeds do.
func TestEntriesAreWhatTheyClaim(t *testing.T) {
	check := func(name, text string, n int, ok func(netip.Prefix) bool) {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("%s: %d lines, want %d", name, len(lines), n)
		}
		for _, l := range lines {
			p, err := netip.ParsePrefix(l)
			if err != nil || !ok(p) {
				t.Fatalf("%s: entry %q (%v)", name, l, err)
			}
		}
	}
	v4 := Range(40, 44)
	check("Mixed", Mixed{Seed: 3, V4First: v4, V6Second: Range(0x10, 0x1f)}.Text(5000), 5000, func(p netip.Prefix) bool {
		a := p.Addr().AsSlice()
		if p.Addr().Is4() {
			return a[0] >= 40 && a[0] <= 44 && p.Bits() >= 16 && p.Bits() <= 32
		}
		return a[0] == 0x2a && a[1] >= 0x10 && a[1] <= 0x1f && p.Bits() >= 32 && p.Bits() <= 64
	})
	docs := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	check("Dense", Dense{Seed: 5, V6Every: 3}.Text(5000), 5000, func(p netip.Prefix) bool {
		for _, d := range docs {
			if d.Overlaps(p) {
				return false
			}
		}
		return p.Masked() == p && (p.Addr().Is4() && p.Bits() == 24 || p.Addr().Is6() && p.Bits() == 48)
	})
	check("Sequential", Sequential(300), 300, func(p netip.Prefix) bool {
		return p.Masked() == p && p.Bits() == 24 && p.Addr().AsSlice()[0] == 10
	})
}

// Fixed entries come first and keep the numbering: the generated rest is
// what a list without them would hold from that entry on.
func TestDenseFixedKeepsTheNumbering(t *testing.T) {
	plain := strings.SplitAfter(Dense{Seed: 9, V6Every: 4}.Text(100), "\n")
	fixed := strings.SplitAfter(Dense{Seed: 9, V6Every: 4, Fixed: []string{"a", "b"}}.Text(100), "\n")
	if fixed[0] != "a\n" || fixed[1] != "b\n" {
		t.Fatalf("fixed entries: %q", fixed[:2])
	}
	// Entry 4 is IPv6 in both (4%4 == 0), entry 2 in neither.
	if !strings.Contains(fixed[4], ":") || !strings.Contains(plain[4], ":") {
		t.Errorf("entry 4: %q and %q, want IPv6 in both", fixed[4], plain[4])
	}
	if strings.Contains(fixed[2], ":") || strings.Contains(plain[2], ":") {
		t.Errorf("entry 2: %q and %q, want IPv4 in both", fixed[2], plain[2])
	}
	if got := (Dense{Seed: 9}).Text(0); got != "" {
		t.Errorf("no entries: %q", got)
	}
	if got := (Dense{Fixed: []string{"a", "b"}}).Text(1); got != "a\n" {
		t.Errorf("one entry of two fixed: %q", got)
	}
}

func TestSameSeedSameList(t *testing.T) {
	if a, b, c := (Mixed{Seed: 4}).Text(2000), (Mixed{Seed: 4}).Text(2000), (Mixed{Seed: 5}).Text(2000); a != b || a == c {
		t.Error("Mixed is not a function of its seed")
	}
	if a, b, c := (Dense{Seed: 4}).Text(2000), (Dense{Seed: 4}).Text(2000), (Dense{Seed: 5}).Text(2000); a != b || a == c {
		t.Error("Dense is not a function of its seed")
	}
}
