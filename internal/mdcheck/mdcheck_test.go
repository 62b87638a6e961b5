package mdcheck

import (
	"strings"
	"testing"
)

const marker = "<!-- m -->"

// TestCheck: whole comments pass; each way of breaking one is named.
func TestCheck(t *testing.T) {
	good := marker + "\n| a | b |\n|---|---|\n| `x\\|y` | \\<img\\> |\n\n<details><summary>s</summary>\n\n```json\n</details>\n```\n\n`</details>`\n\n</details>\n"
	if bad := Check(good, 1000, marker); len(bad) != 0 {
		t.Errorf("a whole comment: %q", bad)
	}
	for _, tc := range []struct{ body, want string }{
		{marker + "\n" + strings.Repeat("é", 20), "code points, over"},
		{"no marker\n", "no marker"},
		{marker + "\n```\nopen\n", "code block left open"},
		{marker + "\n<details><summary>s</summary>\n", "left open"},
		{marker + "\n</details>\n", "closes nothing"},
		{marker + "\n<img src=x onerror=alert(1)>\n", "raw HTML"},
		{marker + "\n| a | b |\n|---|---|\n| `a\\\\|b` | c |\n", "cells"},
		{marker + "\na\u202eb\n", "bidi"},
	} {
		bad := Check(tc.body, 10+len([]rune(marker)), marker)
		if !strings.Contains(strings.Join(bad, "; "), tc.want) {
			t.Errorf("%q: %q, want %q", tc.body, bad, tc.want)
		}
	}
}
