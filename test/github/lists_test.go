package github_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/mdcheck"
	"github.com/policyrollout/reconciler/internal/preview"
)

// listPolicy denies what the blocklist IP list holds; its test keeps an
// address outside any list allowed.
const listPolicy = `default_action = "allow"

[[rules]]
name = "blocklist"
priority = 10
action = "deny"
match = 'inIpList(request.source_ip, "blocklist")'

[[tests]]
name = "outside"
request = { path = "/", source_ip = "192.0.2.1" }
expect = "allow"
`

// A small live list: the 1,000,000-entry case is test/lists's.
const liveBlocklist = "# a FireHOL-style netset\n203.0.113.0/24\n2001:db8:dead::/48\n"

// liveRow is the comment's live traffic row: Evaluated, Unchanged,
// ALLOW→DENY, DENY→ALLOW.
var liveRow = regexp.MustCompile(`(?m)^\| Live \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|`)

// TestPullRequestAddingCIDRsPreviewsInComment (issue 23, done when): a
// pull request that adds 1,000 CIDRs to a list previews on live traffic
// from addresses inside them, and its comment, as GitHub stored it, says
// the list gained 1,000 entries and lost none and that live requests
// would now be denied, within GitHub's limit on a comment.
func TestPullRequestAddingCIDRsPreviewsInComment(t *testing.T) {
	t.Parallel()
	e := startEnvFiles(t, map[string]string{
		"web/policy.toml":         listPolicy,
		"_lists/blocklist.netset": liveBlocklist,
	}, "", true)

	// 1,000 /32s in 198.51.100.0/24 and 198.51.101.0/24 … 198.51.103.0/24;
	// only the list changes, no policy file.
	var added strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&added, "198.51.%d.%d/32\n", 100+i/250, i%250)
	}
	n, head := e.openPullFiles("block-more", map[string]string{
		"_lists/blocklist.netset": liveBlocklist + added.String(),
	}, "block 1,000 more addresses")
	e.gh.WaitStatus(head, forge.ContextValidate, forge.StateSuccess)
	e.gh.WaitStatus(head, forge.ContextPreview, forge.StateSuccess)

	// Live traffic from inside the added CIDRs (still allowed live) and
	// from outside (unchanged), on every node, until the comment counts it.
	var body string
	var a2d int
	eventually(t, "the comment counting changed live decisions", func() error {
		for i := range e.nodes {
			for _, ip := range []string{"198.51.100.1", "198.51.103.249", "192.0.2.1"} {
				if got := e.decideRequest(i, fmt.Sprintf(`{"path":"/","source_ip":%q}`, ip)); got != "ALLOW" {
					t.Fatalf("live decision from %s on node %d: %s", ip, i, got)
				}
			}
			if got := e.decideRequest(i, `{"path":"/","source_ip":"203.0.113.7"}`); got != "DENY" {
				t.Fatalf("live decision inside the live list on node %d: %s", i, got)
			}
		}
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, head[:12]) {
			return fmt.Errorf("%d comments at head %s", len(cs), head[:12])
		}
		body = cs[0].Body
		m := liveRow.FindStringSubmatch(body)
		if m == nil {
			return fmt.Errorf("no live traffic row yet")
		}
		a2d, _ = strconv.Atoi(m[3])
		if a2d == 0 {
			return fmt.Errorf("live row %q", m[0])
		}
		return nil
	})
	t.Logf("comment: %d code points, %d live requests ALLOW→DENY", utf8.RuneCountInString(body), a2d)

	if row := "| `blocklist` | `_lists/blocklist.netset` | 1000 | 0 | 1002 |"; !strings.Contains(body, row) {
		t.Errorf("no row %s in the comment:\n%s", row, body)
	}
	if m := liveRow.FindStringSubmatch(body); m[4] != "0" {
		t.Errorf("adding entries to a deny list allowed live requests: %q", m[0])
	}
	if !strings.Contains(body, "198.51.10") {
		t.Errorf("the comment names no source address inside the added CIDRs:\n%s", body)
	}
	if strings.Contains(body, "192.0.2.1`") {
		t.Errorf("the comment names an address whose decision did not change:\n%s", body)
	}
	for _, bad := range mdcheck.Check(body, preview.MaxCommentChars, forge.Marker) {
		t.Error(bad)
	}
}
