package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Never rewind. Generations follow the history of the live branch: a head
// that does not descend from the active generation's commit (a force-push,
// unrelated history, a repository re-created from git.init_from) would
// silently undo merged work everywhere at once. The leader promotes no
// such head; the source is marked diverged in the status until an operator
// accepts the new history by naming its head commit (AcceptHistory:
// `reconciler accept-history COMMIT`, POST /v1/generations:acceptHistory),
// or the branch is pushed back onto the active commit's history.

// Divergence is a live-branch head the leader refused to promote.
type Divergence struct {
	// Commit is the head of the live branch.
	Commit string `json:"commit"`
	// Active is the active generation's commit, which Commit does not
	// descend from.
	Active string `json:"active"`
	// Since is when the leader first saw this head.
	Since time.Time `json:"since"`
}

// ancestry is a Source that can tell whether one commit is in another's
// history (gitsource.Source.IsAncestor). A source without it (the tests'
// fakes) is not checked.
type ancestry interface {
	IsAncestor(ancestor, descendant string) (bool, error)
}

// mayPromote reports whether head may become generations: it descends
// from the active generation's commit, or an operator accepted it. When
// it may not, the divergence is recorded for the status and logged once.
func (l *Loop) mayPromote(st *raftstore.State, head gitsource.Revision) (bool, error) {
	a, ok := l.cfg.Source.(ancestry)
	g, active := st.ActiveGeneration()
	if !ok || !active || g.Commit == "" || IsDirCommit(g.Commit) {
		return true, nil
	}
	l.mu.Lock()
	accepted := l.accepted == head.Hash
	l.mu.Unlock()
	descends := accepted
	if !accepted {
		var err error
		if descends, err = a.IsAncestor(g.Commit, head.Hash); err != nil {
			return false, fmt.Errorf("checking that %s descends from the active commit: %w", head, err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if descends {
		l.diverged = nil
		return true, nil
	}
	if l.diverged == nil || l.diverged.Commit != head.Hash {
		l.diverged = &Divergence{Commit: head.Hash, Active: g.Commit, Since: l.cfg.Now()}
		l.log.Error("the live branch does not descend from the active generation's commit: nothing is promoted "+
			"until an operator accepts the new history (reconciler accept-history COMMIT)",
			"revision", head.String(), "active", l.revision(g.Commit), "generation", g.Number)
	}
	return false, nil
}

// Diverged is the live-branch head the leader refuses to promote, nil
// when there is none (for the GitHub worker's reconciler/promote status).
func (l *Loop) Diverged() *Divergence {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.diverged
}

// AcceptHistory lets the leader promote the live branch's head commit
// although it does not descend from the active generation's commit, after
// an operator checked it. commit must be the divergent head the status
// shows: accepting anything else (a head that moved again meanwhile) is
// FAILED_PRECONDITION, so that nobody accepts a history they did not see.
// The promotion itself is the normal one (validated, staged, activated).
func (l *Loop) AcceptHistory(ctx context.Context, commit string) error {
	if !l.leading.Load() {
		return fmt.Errorf("%w: this node's reconcile loop is not running", raftstore.ErrNotLeader)
	}
	l.mu.Lock()
	d := l.diverged
	if d != nil && d.Commit == commit {
		l.accepted = commit
	}
	l.mu.Unlock()
	if d == nil || d.Commit != commit {
		shown := "the live branch has not diverged"
		if d != nil {
			shown = "the divergent head is " + d.Commit
		}
		return &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"commit %q is not the divergent head of %s (%s): nothing accepted", commit, l.cfg.Branch, shown)}
	}
	l.log.Warn("operator accepted a history that does not descend from the active generation",
		"revision", l.revision(commit), "active", l.revision(d.Active))
	l.forcePass.Store(true)
	l.Trigger()
	return nil
}
