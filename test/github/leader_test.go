package github_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/forge"
)

// After the leader's process is killed (kill -9), the new leader finds the
// pull request's comment by its marker and edits it: still exactly one.
func TestCommentFoundAgainAfterLeaderChange(t *testing.T) {
	e := newEnv(t)
	n, head1 := e.openPull("deny-admin", webPolicy("/admin"))
	e.gh.WaitStatus(head1, forge.ContextPreview, forge.StateSuccess)
	eventually(t, "one preview comment", func() error {
		if cs := e.gh.MarkedComments(n); len(cs) != 1 {
			return fmt.Errorf("%d comments", len(cs))
		}
		return nil
	})
	id := e.gh.MarkedComments(n)[0].ID
	old := e.cluster.WaitLeader(waitLimit)
	old.Kill()
	leader := slices.Index(e.nodes, old)
	e.via = (leader + 1) % len(e.nodes)
	// A new leader, one of the survivors (WaitLeader leaves the killed
	// process out), that all of them name: the webhook's trigger goes from
	// e.via to it, and a missed trigger would wait for the hourly poll.
	e.cluster.WaitLeader(waitLimit)
	head2 := e.pushPull(n, "deny-admin", webPolicy("/admin", "/secret"))
	e.gh.WaitStatus(head2, forge.ContextValidate, forge.StateSuccess)
	eventually(t, "the same comment edited by the new leader", func() error {
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || cs[0].ID != id || !strings.Contains(cs[0].Body, head2[:12]) {
			return fmt.Errorf("%d comments", len(cs))
		}
		return nil
	})
}
