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
	if err := json.Unmarshal([]byte(`[{"kind":"branch","changedPolicies":7}]`), &back); err != nil || back[0] != (StatusExperiment{}) {
		t.Errorf("a branch row of the wrong shape: %+v, %v; want it skipped", back, err)
	}
}

// A row that does not decode as its kind (a newer server's field of
// another type, a kind that is not a string) is skipped like a row of an
// unknown kind: the whole status failed to decode, where the CLI of the
// untyped rows skipped it.
func TestStatusExperimentRowThatDoesNotDecodeIsSkipped(t *testing.T) {
	t.Parallel()
	var rows []StatusExperiment
	data := `[{"name":"policies/a/experiments/e","kind":"experiment","previewed":"yes"},{"kind":7},` +
		`{"name":"branches/x","kind":"branch"}]`
	if err := json.Unmarshal([]byte(data), &rows); err != nil {
		t.Fatalf("the status failed on one row: %v", err)
	}
	if len(rows) != 3 || rows[0].Experiment != nil || rows[0].Branch != nil || rows[1] != (StatusExperiment{}) ||
		rows[2].Branch == nil || rows[2].Branch.Name != "branches/x" {
		t.Fatalf("rows = %+v", rows)
	}
}
