package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// The leader keeps two kinds of documents in the replicated state beside
// the AIP experiments of internal/preview ("policies/…"), through the
// opaque raftstore.PutExperiment/DeleteExperiment commands, so that every
// node (followers included, and a new leader) shows them:
//
//   - SourceRecordName: the policy source's pull error, while there is one.
//   - BranchRecordPrefix + branch: what each branch other than the live one
//     changes, and whether it validates.
//
// Readers of State.Experiments that expect AIP experiments must skip
// names outside "policies/". docs/git.md names the raftstore command that
// should replace this use.
const (
	SourceRecordName   = "sources/git"
	BranchRecordPrefix = "branches/"
)

// SourceRecord is the PullError of the policy source, replicated. It
// exists only while fetching fails; the first successful fetch deletes it.
type SourceRecord struct {
	// URL is the remote, redacted.
	URL string `json:"url"`
	// Error says what failed and what happens next (scrubbed of secrets).
	Error string `json:"error"`
	// Reason is gitsource's classification: network, timeout, auth,
	// not-found, canceled; "" for other errors.
	Reason string `json:"reason,omitempty"`
	// Since is when fetching started failing (the leader's clock).
	Since time.Time `json:"since"`
	// Revision is the last revision of the live branch read successfully,
	// the one the cluster keeps following.
	Revision string `json:"revision,omitempty"`
}

// BranchRecord is one branch other than the live one, as an experiment
// tracked by the leader (CONTRACT.md §5 without GitHub: every other branch
// that changes a policy is an experiment).
type BranchRecord struct {
	Branch     string `json:"branch"`
	HeadCommit string `json:"headCommit"`
	// Revision is "<branch>@sha1:<headCommit>".
	Revision string `json:"revision"`
	// ChangedPolicies names, sorted, the policies whose content differs
	// from the live branch's head.
	ChangedPolicies []string         `json:"changedPolicies"`
	Validation      BranchValidation `json:"validation"`
}

// BranchValidation is the verdict on a branch's whole policies tree.
type BranchValidation struct {
	Valid  bool     `json:"valid"`
	Errors []string `json:"errors"`
}

// ReadSourceRecord returns the replicated pull error, if any.
func ReadSourceRecord(st *raftstore.State) (SourceRecord, bool) {
	doc, ok := st.Experiments[SourceRecordName]
	if !ok {
		return SourceRecord{}, false
	}
	var r SourceRecord
	if err := json.Unmarshal(doc.Data, &r); err != nil || r.Error == "" {
		return SourceRecord{}, false
	}
	return r, true
}

// ReadBranchRecords returns the replicated branch records, by record name.
// A record that does not decode is skipped.
func ReadBranchRecords(st *raftstore.State) map[string]BranchRecord {
	out := map[string]BranchRecord{}
	for name, doc := range st.Experiments {
		if !strings.HasPrefix(name, BranchRecordPrefix) {
			continue
		}
		var r BranchRecord
		if err := json.Unmarshal(doc.Data, &r); err == nil {
			out[name] = r
		}
	}
	return out
}

// PutRecord encodes v as the document name.
func PutRecord(name string, v any) (*raftstore.PutExperiment, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return &raftstore.PutExperiment{Name: name, Data: data}, nil
}
