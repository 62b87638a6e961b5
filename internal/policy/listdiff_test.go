package policy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestRevalidateAgreesWithAWholeParse: random line edits of a valid list;
// a list revalidated from its previous content counts the entries a
// whole parse does, and a content with a bad line is never accepted by
// revalidation (the whole parse reports it with its line).
func TestRevalidateAgreesWithAWholeParse(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(23, 7))
	good := []string{"10.0.0.0/8", "10.0.0.1", "10.0.0.10", "# c", "", "2001:db8::/32", "10.0.0.0/8 # x", "  10.1.0.0/16"}
	bad := []string{"10.0.0.300", "\x00", "\xff", "nope"}
	pick := func() string {
		if r.IntN(8) == 0 {
			return bad[r.IntN(len(bad))]
		}
		return good[r.IntN(len(good))]
	}
	revalidated := 0
	for range 3000 {
		lines := make([]string, r.IntN(6))
		for i := range lines {
			lines[i] = good[r.IntN(len(good))]
		}
		next := slices.Clone(lines)
		for range 1 + r.IntN(2) {
			switch i := r.IntN(len(next) + 1); r.IntN(3) {
			case 0:
				next = slices.Insert(next, i, pick())
			case 1:
				if i < len(next) {
					next = slices.Delete(next, i, i+1)
				}
			default:
				if i < len(next) {
					next[i] = pick()
				}
			}
		}
		oldData := []byte(strings.Join(lines, "\n") + "\n")
		newData := []byte(strings.Join(next, "\n"))
		if r.IntN(2) == 0 {
			newData = append(newData, '\n')
		}
		checkChangedLines(t, oldData, newData)
		base, errs := parseListData("_lists/r.netset", "r", ListIP, oldData)
		if errs != nil {
			t.Fatal(errs)
		}
		whole, wholeErrs := parseListData("_lists/r.netset", "r", ListIP, newData)
		got := revalidate(base, "_lists/r.netset", "r", ListIP, newData)
		switch {
		case got != nil && wholeErrs != nil:
			t.Fatalf("%q -> %q: revalidated a list with problems %v", oldData, newData, wholeErrs)
		case got != nil && got.Entries != whole.Entries:
			t.Fatalf("%q -> %q: %d entries revalidated, %d whole", oldData, newData, got.Entries, whole.Entries)
		case got != nil:
			revalidated++
		}
	}
	if revalidated == 0 {
		t.Error("nothing was revalidated")
	}
}

// checkChangedLines checks what revalidate and the engine's derived lists
// rely on: old and new are one common prefix and one common suffix, both
// of whole lines, around the removed and the added lines.
func checkChangedLines(t *testing.T, old, new []byte) {
	t.Helper()
	removed, added := ChangedLines(old, new)
	// Both are subslices: where they start is what the capacities say.
	a, b := cap(old)-cap(removed), cap(new)-cap(added)
	prefix, suffix := old[:a], old[a+len(removed):]
	if a != b || !bytes.Equal(new[:b], prefix) || !bytes.Equal(new[b+len(added):], suffix) {
		t.Fatalf("%q -> %q: removed %q, added %q are not the middle of a common prefix and suffix", old, new, removed, added)
	}
	if len(prefix) > 0 && prefix[len(prefix)-1] != '\n' {
		t.Fatalf("%q -> %q: common prefix %q does not end a line", old, new, prefix)
	}
	for _, mid := range [][]byte{removed, added} {
		if len(suffix) > 0 && len(prefix)+len(mid) > 0 && !bytes.HasSuffix(append(slices.Clone(prefix), mid...), []byte("\n")) {
			t.Fatalf("%q -> %q: common suffix %q does not start a line", old, new, suffix)
		}
	}
}

// TestParseListReportsABadAppendedLineWithItsLine: a bad line appended to
// a list validated before is reported as a whole parse reports it.
func TestParseListReportsABadAppendedLineWithItsLine(t *testing.T) {
	t.Parallel()
	data := "# list\n10.0.0.0/8\n"
	if _, errs := parseList("_lists/appended.netset", "appended", ListIP, []byte(data)); errs != nil {
		t.Fatal(errs)
	}
	_, errs := parseList("_lists/appended.netset", "appended", ListIP, []byte(data+"10.0.0.300\n"))
	if len(errs) != 1 || errs[0].Line != 3 || !strings.Contains(errs[0].Error(), "10.0.0.300") {
		t.Errorf("problems %v, want one at line 3 quoting the line", errs)
	}
}

// BenchmarkOneLineChangeValidation is what loading a tree pays to
// validate a one-line change to a 1,000,000-line list: "whole" validates
// every line (as every node did before), "revalidated" only the changed
// one. Compare the two from the same run.
func BenchmarkOneLineChangeValidation(b *testing.B) {
	var sb strings.Builder
	for i := range 1_000_000 {
		sb.WriteString(fmt.Sprintf("%d.%d.%d.0/24\n", 11+i%180, i>>8&255, i&255))
	}
	old := []byte(sb.String())
	next := append(slices.Clone(old), "198.51.100.0/24\n"...)
	base, errs := parseListData("_lists/b.netset", "b", ListIP, old)
	if errs != nil {
		b.Fatal(errs)
	}
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if _, errs := parseListData("_lists/b.netset", "b", ListIP, next); errs != nil {
				b.Fatal(errs)
			}
		}
	})
	b.Run("revalidated", func(b *testing.B) {
		for b.Loop() {
			if revalidate(base, "_lists/b.netset", "b", ListIP, next) == nil {
				b.Fatal("not revalidated")
			}
		}
	})
}
