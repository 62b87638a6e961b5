package main

import (
	"strings"
	"testing"
)

// `reconciler validate` prints each list's entries and compiled size, and
// `reconciler eval --lists` the entry a request matched, with its line.
func TestValidateAndEvalShowLists(t *testing.T) {
	code, out, errOut := cli(t, "", "validate", "../../policies.example")
	if code != exitOK || !strings.Contains(out, "list abuse-blocklist (_lists/abuse-blocklist.netset, an IP list): 4 entries, ") ||
		!strings.Contains(out, "list retired-hosts (_lists/retired-hosts.txt, a string list): 2 entries, ") {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, `{"source_ip":"5.188.11.200","host":"Legacy-Shop.example.com","path":"/"}`,
		"eval", "--lists", "--policy", "../../policies.example/edge-firewall")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 2 || !strings.Contains(lines[0], `"rule":"deny-abuse-blocklist"`) ||
		lines[1] != `{"list":"abuse-blocklist","field":"source_ip","value":"5.188.11.200","entry":"5.188.10.0/23","file":"_lists/abuse-blocklist.netset","line":9}` {
		t.Fatalf("eval --lists: exit %d\n%s%s", code, out, errOut)
	}
}
