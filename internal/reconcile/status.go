package reconcile

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// StatusRecords reads the loop's replicated records for GET /v1/status
// (api.LeaderRecords), on any node: the source's pull error and the
// branch records.
type StatusRecords struct{}

// PullError returns the replicated pull error of the policy source and
// since when it fails, if there is one.
func (StatusRecords) PullError(st *raftstore.State) (msg string, since time.Time, ok bool) {
	rec, ok := ReadSourceRecord(st)
	return rec.Error, rec.Since, ok
}

// Branches renders the branch records (every branch other than the live
// one) by name: {"name": "branches/<branch>", "kind": "branch", ...}.
func (StatusRecords) Branches(st *raftstore.State) []json.RawMessage {
	recs := ReadBranchRecords(st)
	out := make([]json.RawMessage, 0, len(recs))
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		data, err := json.Marshal(struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
			BranchRecord
		}{name, "branch", recs[name]})
		if err == nil {
			out = append(out, data)
		}
	}
	return out
}
