package changepath_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// Issue 24, findings 3 and 4, with three real nodes: a branch experiment
// deleted through the API stays deleted after a push to an unrelated
// branch and comes back once its branch changes the policy again; the
// delete's operation is listed with a filter, waited for, refused a
// cancel (done), and deleted everywhere.
func TestDeletedBranchExperimentAndOperations(t *testing.T) {
	e := start(t, "")
	e.push("try", map[string]string{"web/policy.toml": flip(webPolicy, "'GET'", "'HEAD'")}, "web: HEAD")
	e.reconcile()
	const name = "policies/web/experiments/branch-try"
	first := e.waitExperiment(name)
	var del operation
	if code := e.call(2, http.MethodDelete, "/v1/"+name, "", &del); code != 200 || del.Error != nil || !del.Done {
		t.Fatalf("delete: %d %+v", code, del)
	}

	// branch-zz-other is stored after branch-try would be (name order),
	// so once it exists the pass has decided about branch-try.
	e.push("zz-other", map[string]string{"web/policy.toml": flip(webPolicy, "'GET'", "'PUT'")}, "web: PUT")
	e.reconcile()
	e.waitExperiment("policies/web/experiments/branch-zz-other")
	if _, code := e.experiment(name); code != 404 {
		t.Fatalf("the deleted branch experiment came back after a push to another branch: HTTP %d", code)
	}

	var list struct {
		Operations []operation `json:"operations"`
	}
	filter := url.QueryEscape(`metadata.verb = delete AND metadata.target = "` + name + `"`)
	if code := e.call(1, http.MethodGet, "/v1/operations?filter="+filter, "", &list); code != 200 ||
		len(list.Operations) != 1 || list.Operations[0].Name != del.Name {
		t.Fatalf("list of the delete operations: %d %+v", code, list)
	}
	var waited operation
	if code := e.call(0, http.MethodPost, "/v1/"+del.Name+":wait", `{"timeout":"10s"}`, &waited); code != 200 || !waited.Done {
		t.Fatalf(":wait: %d %+v", code, waited)
	}
	var refusal struct{ Error apiError }
	if code := e.call(2, http.MethodPost, "/v1/"+del.Name+":cancel", "{}", &refusal); code != 400 ||
		refusal.Error.Status != "FAILED_PRECONDITION" {
		t.Fatalf(":cancel of a done operation: %d %+v", code, refusal.Error)
	}
	if code := e.call(2, http.MethodDelete, "/v1/"+del.Name, "", nil); code != 200 {
		t.Fatalf("DELETE operation: %d", code)
	}
	for i := range e.c.Nodes {
		e.eventually(fmt.Sprintf("the operation gone on node %d", i), func() error {
			if code := e.call(i, http.MethodGet, "/v1/"+del.Name, "", nil); code != 404 {
				return fmt.Errorf("HTTP %d", code)
			}
			return nil
		})
	}

	e.push("try", map[string]string{"web/policy.toml": flip(webPolicy, "'GET'", "'OPTIONS'")}, "web: OPTIONS")
	e.reconcile()
	again := e.waitExperiment(name)
	if again.Etag == first.Etag || again.Source.HeadCommit == first.Source.HeadCommit {
		t.Errorf("the experiment back is the deleted one: %+v", again)
	}
}

// waitExperiment waits until the experiment exists and returns it.
func (e *env) waitExperiment(name string) experiment {
	e.t.Helper()
	var x experiment
	e.eventually(name, func() error {
		var code int
		if x, code = e.experiment(name); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	return x
}
