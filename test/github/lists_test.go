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
// would now be denied, within GitHub's limit on a comment. A push that
// also drops a live entry then shows it removed and its traffic allowed.
func TestPullRequestAddingCIDRsPreviewsInComment(t *testing.T) {
	t.Parallel()
	e := startEnvFiles(t, map[string]string{
		"web/policy.toml":         listPolicy,
		"_lists/blocklist.netset": liveBlocklist,
	}, "", true)

	// 1,000 /32s in 198.51.100.0/24 to 198.51.103.0/24; only the list
	// changes, no policy file.
	var added strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&added, "198.51.%d.%d/32\n", 100+i/250, i%250)
	}
	n, head := e.openPullFiles("block-more", map[string]string{
		"_lists/blocklist.netset": liveBlocklist + added.String(),
	}, "block 1,000 more addresses")
	e.gh.WaitStatus(head, forge.ContextValidate, forge.StateSuccess)
	e.gh.WaitStatus(head, forge.ContextPreview, forge.StateSuccess)

	body, live := e.listComment(n, head, func(live []int) bool { return live[2] > 0 })
	if row := "| `blocklist` | `_lists/blocklist.netset` | 1000 | 0 | 1002 |"; !strings.Contains(body, row) {
		t.Errorf("no row %s in the comment:\n%s", row, body)
	}
	if live[3] != 0 {
		t.Errorf("adding entries to a deny list allowed live requests: %v", live)
	}
	if !strings.Contains(body, "`198.51.100.1`") || !strings.Contains(body, "`198.51.103.249`") {
		t.Errorf("the comment's top sources miss the addresses inside the added CIDRs:\n%s", body)
	}
	if strings.Contains(body, "`192.0.2.1`") {
		t.Errorf("the comment names an address whose decision did not change:\n%s", body)
	}

	// The same pull request now also drops 203.0.113.0/24, which live
	// traffic from 203.0.113.7 is denied by.
	head2 := e.pushPullFiles(n, "block-more", map[string]string{
		"_lists/blocklist.netset": strings.Replace(liveBlocklist, "203.0.113.0/24\n", "", 1) + added.String(),
	}, "unblock 203.0.113.0/24")
	e.gh.WaitStatus(head2, forge.ContextValidate, forge.StateSuccess)
	body, live = e.listComment(n, head2, func(live []int) bool { return live[2] > 0 && live[3] > 0 })
	if row := "| `blocklist` | `_lists/blocklist.netset` | 1000 | 1 | 1001 |"; !strings.Contains(body, row) {
		t.Errorf("no row %s in the comment:\n%s", row, body)
	}
	t.Logf("comment at the second head: %d code points, live %v", utf8.RuneCountInString(body), live)
}

// listComment sends every node live traffic from inside the added CIDRs
// (allowed live), from 203.0.113.7 (denied live) and from outside any
// list, until pull request n's comment shows head and its live row
// (Evaluated, Unchanged, ALLOW→DENY, DENY→ALLOW) satisfies done. It checks
// the comment as GitHub would and returns it with that row.
func (e *env) listComment(n int, head string, done func(live []int) bool) (string, []int) {
	e.t.Helper()
	var body string
	var live []int
	eventually(e.t, "the comment counting changed live decisions", func() error {
		for i := range e.nodes {
			for ip, want := range map[string]string{"198.51.100.1": "ALLOW", "198.51.103.249": "ALLOW",
				"192.0.2.1": "ALLOW", "203.0.113.7": "DENY"} {
				if got := e.decideRequest(i, fmt.Sprintf(`{"path":"/","source_ip":%q}`, ip)); got != want {
					e.t.Fatalf("live decision from %s on node %d: %s, want %s", ip, i, got, want)
				}
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
		live = live[:0]
		for _, v := range m[1:] {
			c, _ := strconv.Atoi(v)
			live = append(live, c)
		}
		if !done(live) {
			return fmt.Errorf("live row %q", m[0])
		}
		return nil
	})
	for _, bad := range mdcheck.Check(body, preview.MaxCommentChars, forge.Marker) {
		e.t.Error(bad)
	}
	return body, live
}
