package apiv1

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Kinds of the rows of Status.Experiments.
const (
	KindBranch     = "branch"
	KindExperiment = "experiment"
)

// StatusExperiment is one row of Status.Experiments, by its kind: a
// branch record (kind "branch": Branch) or an AIP-236 experiment (kind
// "experiment": Experiment). On the wire it is that view's JSON alone, so
// the two kinds keep their own keys in one list. A row of a kind this
// build does not know (a newer server's) decodes with neither set, for a
// client to skip rather than fail the whole status.
type StatusExperiment struct {
	Branch     *BranchStatus
	Experiment *ExperimentStatus
}

// MarshalJSON writes the view the row holds (null for none).
func (e StatusExperiment) MarshalJSON() ([]byte, error) {
	switch {
	case e.Experiment != nil:
		return json.Marshal(e.Experiment)
	case e.Branch != nil:
		return json.Marshal(e.Branch)
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads a row by its "kind". A row that does not decode as
// its kind (a newer server's field of another type, a kind that is not a
// string) decodes with neither set, as a row of an unknown kind does: a
// client skips it rather than fail the whole status.
func (e *StatusExperiment) UnmarshalJSON(data []byte) error {
	*e = StatusExperiment{}
	var head struct {
		Kind string `json:"kind"`
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) || json.Unmarshal(data, &head) != nil {
		return nil
	}
	switch head.Kind {
	case KindExperiment:
		var x ExperimentStatus
		if json.Unmarshal(data, &x) == nil {
			e.Experiment = &x
		}
	case KindBranch:
		var b BranchStatus
		if json.Unmarshal(data, &b) == nil {
			e.Branch = &b
		}
	}
	return nil
}

// FromStatusExperiments is the one mapping of Status.Experiments: the
// leader's branch records by record name ("branches/<branch>"), then the
// AIP-236 experiments ("policies/{policy}/experiments/{id}"), each sorted
// by name. Never nil: the status always has the list.
func FromStatusExperiments(branches map[string]raftstore.BranchRecord, exps []*preview.Experiment) []StatusExperiment {
	out := make([]StatusExperiment, 0, len(branches)+len(exps))
	for _, name := range slices.Sorted(maps.Keys(branches)) {
		b := FromBranch(name, branches[name])
		out = append(out, StatusExperiment{Branch: &b})
	}
	exps = slices.SortedFunc(slices.Values(exps), func(a, b *preview.Experiment) int { return strings.Compare(a.Name, b.Name) })
	for _, x := range exps {
		es := FromExperimentStatus(x)
		out = append(out, StatusExperiment{Experiment: &es})
	}
	return out
}
