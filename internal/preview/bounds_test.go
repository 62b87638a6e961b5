package preview_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
)

// TestClusterWideExperimentCap: the per-policy cap alone let a writer
// store experiments under any number of policy names (each one
// replicated state on every node); the cluster-wide cap refuses the one
// past it, whatever its policy or source.
func TestClusterWideExperimentCap(t *testing.T) {
	s := preview.Settings{MaxTotal: 3}
	var exps []*preview.Experiment
	for i := range 3 {
		p := webPolicy()
		p.Name = fmt.Sprintf("p%d", i)
		e, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/" + p.Name, ExperimentID: "x", Policy: p,
			Source: apiSource()}, s, t0)
		if err != nil {
			t.Fatalf("experiment %d: %v", i, err)
		}
		exps = append(exps, e)
	}
	for _, src := range []preview.Source{apiSource(), {Kind: preview.SourceBranch, Branch: "b", HeadCommit: "c"}} {
		p := webPolicy()
		p.Name = "other"
		_, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/other", ExperimentID: "y", Policy: p, Source: src}, s, t0)
		wantCode(t, err, preview.ResourceExhausted)
		if err != nil && !strings.Contains(err.Error(), "preview.max_experiments") {
			t.Errorf("the error does not name the setting: %v", err)
		}
	}
}

// TestAnnotationBounds: at most 64 annotations of 64 KiB in all.
func TestAnnotationBounds(t *testing.T) {
	many := map[string]string{}
	for i := range 65 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	big := map[string]string{"blob": strings.Repeat("x", 64<<10)}
	for name, ann := range map[string]map[string]string{"65 annotations": many, "64 KiB and more": big} {
		_, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "x", Policy: webPolicy(),
			Annotations: ann, Source: apiSource()}, preview.Settings{}, t0)
		wantCode(t, err, preview.InvalidArgument)
		e := create(t, nil, "x", webPolicy())
		_, err = preview.Update(e, preview.UpdateRequest{Annotations: ann}, at(1))
		if err == nil {
			t.Errorf("%s: update accepted", name)
		}
	}
	delete(many, "k0")
	if _, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "x", Policy: webPolicy(),
		Annotations: many, Source: apiSource()}, preview.Settings{}, t0); err != nil {
		t.Errorf("64 annotations: %v", err)
	}
}
