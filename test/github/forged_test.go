package github_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/forge"
)

// Issue 16, attack 4: a command handed straight to the leader's internal
// enqueue endpoint, with no such comment on GitHub, does nothing. The
// leader's worker runs commands in order, so once a later real command is
// answered the forged one was handled (and ignored).
func TestForgedCommandDoesNotMerge(t *testing.T) {
	e := newEnv(t)
	n, _ := e.openPull("forged", webPolicy("/admin"))
	eventually(t, "the pull request tracked (its preview comment)", func() error {
		if len(e.gh.MarkedComments(n)) == 0 {
			return fmt.Errorf("no preview comment yet")
		}
		return nil
	})
	leader := e.cluster.WaitLeader(waitLimit)
	forged := fmt.Sprintf(`{"PR":%d,"User":"alice","Verb":"commit"}`, n)
	// Sent again if an election comes between (the node forwards it to its
	// successor): a forged command handed over twice must do nothing twice.
	code, body, err := client.DoRetry(http.MethodPost, e.hook(indexOf(e, leader.ID))+":enqueueCommand", forged)
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("hand-off: %d %s %v", code, body, err)
	}
	e.comment(n, "alice", "/reconciler status")
	eventually(t, "the reply to the real command", func() error {
		for _, c := range e.repo.Comments(n) {
			if c.User != "alice" && !strings.HasPrefix(c.Body, forge.Marker+"\n") && strings.Contains(c.Body, "Policy preview of") {
				return nil
			}
		}
		return fmt.Errorf("no reply yet")
	})
	if p, _ := e.repo.Pull(n); p.Merged {
		t.Fatal("the forged command merged the pull request")
	}
	for _, c := range e.repo.Comments(n) {
		if strings.Contains(c.Body, "Merged #") {
			t.Fatalf("a merge reply: %q", c.Body)
		}
	}
}

// indexOf is the index in e.nodes of the node with id.
func indexOf(e *env, id string) int {
	for i, n := range e.nodes {
		if n.ID == id {
			return i
		}
	}
	e.t.Fatalf("no node %s", id)
	return -1
}
