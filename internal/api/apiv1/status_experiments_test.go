package apiv1

import (
	"encoding/json"
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestStatusExperimentsWire: the typed rows write exactly the bytes the
// server wrote when the list held each view's JSON (the two lines below
// are that output for empty records), in the order it wrote them
// (branches, then experiments, each by name); and a row of a kind this
// build does not know decodes as neither kind instead of failing the
// whole status.
func TestStatusExperimentsWire(t *testing.T) {
	t.Parallel()
	rows := FromStatusExperiments(map[string]raftstore.BranchRecord{"branches/y": {}, "branches/x": {}},
		[]*preview.Experiment{{Name: "policies/b/experiments/e"}, {Name: "policies/a/experiments/e"}})
	got, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"name":"branches/x","kind":"branch","branch":"","headCommit":"","revision":"","changedPolicies":null,"validation":{"valid":false,"errors":null}},` +
		`{"name":"branches/y","kind":"branch","branch":"","headCommit":"","revision":"","changedPolicies":null,"validation":{"valid":false,"errors":null}},` +
		`{"name":"policies/a/experiments/e","kind":"experiment","etag":"","previewed":false,"source":{"kind":""}},` +
		`{"name":"policies/b/experiments/e","kind":"experiment","etag":"","previewed":false,"source":{"kind":""}}]`
	if string(got) != want {
		t.Errorf("rows =\n%s\nwant\n%s", got, want)
	}
	if empty, _ := json.Marshal(FromStatusExperiments(nil, nil)); string(empty) != "[]" {
		t.Errorf("no rows = %s, want []", empty)
	}
	var back []StatusExperiment
	if err := json.Unmarshal([]byte(`[{"kind":"canary","name":"x"},null,{"kind":"branch","name":"branches/x"}]`), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 || back[0] != (StatusExperiment{}) || back[1] != (StatusExperiment{}) ||
		back[2].Branch == nil || back[2].Branch.Name != "branches/x" {
		t.Errorf("decoded %+v", back)
	}
	if err := json.Unmarshal([]byte(`[{"kind":"branch","changedPolicies":7}]`), &back); err == nil {
		t.Error("a branch row of the wrong shape decoded")
	}
}
