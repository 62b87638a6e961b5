package node

import (
	"fmt"
	"net/http"
	"testing"
)

// TestDeletedBranchExperimentStaysDeleted (issue 24 finding 3): a branch
// experiment deleted through the API stays deleted across the pass that a
// push to an unrelated branch makes, and comes back, as a new experiment,
// once the branch changes the policy again (its dismissal then goes).
func TestDeletedBranchExperimentStaysDeleted(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.start("n2", nil)
	all := []string{"n1", "n2"}
	c.allServe(1, all...)
	leader := c.leader(all...)
	f := followerOf(leader, all)
	r := c.repo
	r.srv.CreateBranch(r.work, "tighten")
	r.srv.Commit(r.work, map[string]string{"web/policy.toml": webPolicy(2)}, "tighten web")
	r.srv.Push(r.work, "tighten")
	r.srv.Checkout(r.work, "main")
	c.reconcile(f)
	url := c.base(f) + "/v1/policies/web/experiments/branch-tighten"
	var exp experimentAnswer
	eventually(t, waitTimeout, "the branch experiment", func() error {
		if code := call(t, http.MethodGet, url, "", &exp); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	var op operationAnswer
	if code := call(t, http.MethodDelete, url, "", &op); code != 200 || !op.Done || op.Error != nil {
		t.Fatalf("delete: %d %+v", code, op)
	}

	// A push to an unrelated branch makes a pass that syncs the branch
	// experiments. Its experiment, branch-zz-other, is stored after
	// branch-tighten would be (the sync goes in name order), so once it
	// exists the pass has decided about branch-tighten.
	r.srv.CreateBranch(r.work, "zz-other")
	r.srv.Commit(r.work, map[string]string{"web/policy.toml": webPolicy(4)}, "another idea")
	r.srv.Push(r.work, "zz-other")
	r.srv.Checkout(r.work, "main")
	c.reconcile(f)
	eventually(t, waitTimeout, "the unrelated branch's experiment", func() error {
		if code := call(t, http.MethodGet, c.base(f)+"/v1/policies/web/experiments/branch-zz-other", "", nil); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	if code := call(t, http.MethodGet, url, "", nil); code != 404 {
		t.Fatalf("the deleted branch experiment came back after an unrelated push: HTTP %d", code)
	}

	// The branch changes the policy again: a new experiment.
	r.srv.Checkout(r.work, "tighten")
	r.srv.Commit(r.work, map[string]string{"web/policy.toml": webPolicy(3)}, "tighten web more")
	r.srv.Push(r.work, "tighten")
	r.srv.Checkout(r.work, "main")
	c.reconcile(f)
	var again experimentAnswer
	eventually(t, waitTimeout, "the branch experiment back after a change of the policy", func() error {
		if code := call(t, http.MethodGet, url, "", &again); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	if again.Etag == exp.Etag {
		t.Errorf("the new experiment has the deleted one's etag %s", exp.Etag)
	}
	if d := c.nodes[f].Store().State().Dismissed; len(d) != 0 {
		t.Errorf("dismissals left after the branch changed the policy: %v", d)
	}
}
