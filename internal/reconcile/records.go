package reconcile

import (
	"bytes"
	"encoding/json"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// The leader keeps its records in raftstore's typed tables, so that every
// node (followers included, and a new leader) shows them:
//
//   - State.Sources[raftstore.SourceGit]: the policy source's pull error,
//     while there is one (SourceRecord).
//   - State.Branches: what each branch other than the live one changes,
//     and whether it validates (BranchRecord).
//
// The types are raftstore's, named here as the leader has always named
// them. SourceRecordName and BranchRecordPrefix name the records in
// /v1/status and in logs.
const (
	SourceRecordName   = "sources/git"
	BranchRecordPrefix = "branches/"
)

// SourceRecord is the PullError of the policy source, replicated. It
// exists only while fetching fails; the first successful fetch deletes it.
type SourceRecord = raftstore.SourceStatus

// BranchRecord is one branch other than the live one, as an experiment
// tracked by the leader (CONTRACT.md §5 without GitHub: every other branch
// that changes a policy is an experiment).
type BranchRecord = raftstore.BranchRecord

// BranchValidation is the verdict on a branch's whole policies tree.
type BranchValidation = raftstore.Validation

// ReadSourceRecord returns the replicated pull error, if any.
func ReadSourceRecord(st *raftstore.State) (SourceRecord, bool) {
	r, ok := st.Sources[raftstore.SourceGit]
	return r, ok
}

// ReadBranchRecords returns the replicated branch records, by record name
// (BranchRecordPrefix + branch).
func ReadBranchRecords(st *raftstore.State) map[string]BranchRecord {
	out := make(map[string]BranchRecord, len(st.Branches))
	for name, r := range st.Branches {
		out[BranchRecordPrefix+name] = r
	}
	return out
}

// sameRecord reports whether two records encode alike: the leader writes a
// record only when it changed, so an idle poll writes nothing.
func sameRecord[R any](a, b R) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}
