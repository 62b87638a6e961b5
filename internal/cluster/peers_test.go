package cluster

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCapErrors: whatever a compile produced, the report a node sends
// stays under the cap the leader enforces, and keeps its first error when
// that one fits.
func FuzzCapErrors(f *testing.F) {
	f.Add("web/policy.toml:1: bad", 3, 10)
	f.Add(strings.Repeat("é", 20000), 1, 1)
	f.Add("x", 500, 100)
	f.Fuzz(func(t *testing.T, e string, n, grow int) {
		if n < 0 || n > 500 || grow < 0 || grow > 1000 {
			return
		}
		errs := make([]string, n)
		for i := range errs {
			errs[i] = e + strings.Repeat("y", i*grow%4096)
		}
		got := capErrors(errs)
		if total := errorBytes(got); total > maxReportErrorBytes {
			t.Fatalf("%d errors of %d bytes after the cap", len(got), total)
		}
		if n > 0 && len(errs[0]) < maxReportErrorBytes/2 && got[0] != errs[0] {
			t.Fatalf("first error lost: %q", got[0])
		}
		for _, g := range got {
			if utf8.ValidString(e) && !utf8.ValidString(g) {
				t.Fatalf("the cap split a character: %q", g)
			}
		}
	})
}
