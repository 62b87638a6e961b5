package engine

import "testing"

func TestRedactMatchError(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "",
		`rule "r": no such key: SECRET`: `rule "r": no such key`,
		`rule "r": invalid RFC 3339 timestamp "SECRET"`:               `rule "r": invalid RFC 3339 timestamp "…"`,
		`rule "r": type conversion error from 'string' to 'double'`:   `rule "r": type conversion error from 'string' to 'double'`,
		`rule "r": unbalanced "SECRET`:                                `rule "r": unbalanced "…"`,
		`rule "r": no such key: SECRET; rule "s": no such key: OTHER`: `rule "r": no such key`,
	} {
		if got := RedactMatchError(in); got != want {
			t.Errorf("RedactMatchError(%q) = %q, want %q", in, got, want)
		}
	}
}
