package github_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/forge"
)

// After the leader stops, the new leader finds the pull request's comment
// by its marker and edits it: still exactly one.
func TestCommentFoundAgainAfterLeaderChange(t *testing.T) {
	e := newEnv(t)
	n, head1 := e.openPull("deny-admin", webPolicy("/admin"))
	e.waitStatus(head1, forge.ContextPreview, forge.StateSuccess)
	eventually(t, "one preview comment", func() error {
		if cs := e.markedComments(n); len(cs) != 1 {
			return fmt.Errorf("%d comments", len(cs))
		}
		return nil
	})
	id := e.markedComments(n)[0].ID
	leader := -1
	for i, m := range e.nodes {
		if m.Store().IsLeader() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader")
	}
	if err := e.nodes[leader].Close(); err != nil {
		t.Fatal(err)
	}
	e.via = (leader + 1) % len(e.nodes)
	eventually(t, "a new leader", func() error {
		for i, m := range e.nodes {
			if i != leader && m.Store().IsLeader() {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	head2 := e.pushPull(n, "deny-admin", webPolicy("/admin", "/secret"))
	e.waitStatus(head2, forge.ContextValidate, forge.StateSuccess)
	eventually(t, "the same comment edited by the new leader", func() error {
		cs := e.markedComments(n)
		if len(cs) != 1 || cs[0].ID != id || !strings.Contains(cs[0].Body, head2[:12]) {
			return fmt.Errorf("%d comments", len(cs))
		}
		return nil
	})
}
