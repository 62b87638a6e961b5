package github_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gittest"
)

// Issue 14, failure 6 with GitHub: a force-push of unrelated history to
// main is not promoted, and its head gets a failing reconciler/promote
// saying what accepts it.
func TestForcePushedMainFailsPromote(t *testing.T) {
	e := newEnv(t)
	e.git.Git(e.work, "checkout", "-q", "--orphan", "other")
	other := e.git.Commit(e.work, map[string]string{"web/policy.toml": webPolicy("/other"), "README.md": gittest.Deleted}, "unrelated")
	e.git.Git(e.work, "push", "-qf", "origin", "other:main")
	if code, body, err := client.DoRetry(http.MethodPost, e.nodes[1].Base()+"/v1/cluster:reconcile", "{}"); err != nil || code != 202 {
		t.Fatalf("reconcile: %d %s %v", code, body, err)
	}
	s := e.gh.WaitStatus(other, forge.ContextPromote, forge.StateFailure)
	if !strings.Contains(s.Description, "accept-history") {
		t.Errorf("status %+v does not say what accepts the history", s)
	}
	if st, err := client.Status(e.nodes[0]); err != nil || st.ActiveGeneration != 1 {
		t.Errorf("the force-push was promoted: %+v %v", st, err)
	}
}
