// Package rollback holds the words of a rollback that both its ends use:
// the API that asks for one (internal/api) and the leader loop that writes
// the revert (internal/reconcile). It is a leaf, so that neither end
// imports the other.
package rollback

import (
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Request asks for a commit on the live branch that restores the
// policies root of an earlier generation (CONTRACT.md §5).
type Request struct {
	// Generation is the generation to restore; 0 means the one that was
	// active before the current one.
	Generation uint64
	// Wait bounds how long the rollback waits for the revert commit to
	// become an active generation; 0 returns right after the push.
	Wait time.Duration
	// RequestedBy names who asked, as the audit log does ("alice
	// (admin)", never a secret); it goes in the revert commit's
	// Requested-by trailer, from which the generation's history reads it.
	RequestedBy string
}

// Result is what a rollback did.
type Result struct {
	// Target and TargetCommit are the generation restored and its commit.
	Target       uint64
	TargetCommit string
	// Commit is the revert commit pushed to the live branch, Revision the
	// same as "main@sha1:<hash>", Message its commit message's subject.
	Commit   string
	Revision string
	Message  string
	// Generation is the generation made from Commit (0 when not recorded
	// before the wait ended) and State its state then; Errors are its
	// errors when it is INVALID.
	Generation uint64
	State      raftstore.GenerationState
	Errors     []string
	// PullRequestURL is set when the push to the live branch was refused
	// and, with [github], the revert was opened as a pull request instead;
	// Commit is then on that pull request's branch.
	PullRequestURL string
}
