package reconcile

import (
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

// Branches returns the branch records (every branch other than the live
// one) by record name; the API maps them to its own view.
func (StatusRecords) Branches(st *raftstore.State) map[string]BranchRecord {
	return ReadBranchRecords(st)
}
