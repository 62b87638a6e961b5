package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/rollback"
)

// ErrCannotRollBack means the rollback asked for cannot be done as asked
// (no generation before the active one, an INVALID or directory-based
// target, nothing that would change): a human must choose another target.
var ErrCannotRollBack = errs.Sentinel(errs.FailedPrecondition, "cannot roll back")

// staleRetries is how often a revert is rebuilt when main moved between
// its fetch and its push.
const staleRetries = 3

// RollbackRequest and RollbackResult are the rollback package's, which
// the API asks and answers in too.
type (
	RollbackRequest = rollback.Request
	RollbackResult  = rollback.Result
)

// Rollbacks is the leader's rollback: it writes revert commits on the
// live branch and waits for the generations commits become. It acts only
// while a term runs here, and leaves validation and promotion to the
// loop's normal path.
type Rollbacks struct {
	cfg  *Config // the loop's
	log  hclog.Logger
	loop loopTerm
}

// loopTerm is what a rollback needs of the loop: whether a term runs
// here, a pass soon, and the loop's way of naming live commits.
type loopTerm interface {
	Leading() bool
	Trigger()
	revision(commit string) string
}

var _ loopTerm = (*Loop)(nil)

// Rollback writes "Revert to generation N (<sha>)" on the live branch,
// restoring the policies root of generation N's commit, pushes it, and
// triggers a reconcile, so that the normal path validates and promotes it
// as a new generation (numbers keep growing). It runs only on the leader
// (raftstore.ErrNotLeader otherwise). A refused push matches
// gitsource.ErrPushRefused; an impossible target ErrCannotRollBack.
func (r *Rollbacks) Rollback(ctx context.Context, req RollbackRequest) (RollbackResult, error) {
	if !r.loop.Leading() {
		return RollbackResult{}, fmt.Errorf("%w: this node's reconcile loop is not running", raftstore.ErrNotLeader)
	}
	if r.cfg.Source == nil {
		return RollbackResult{}, fmt.Errorf("%w: %v", ErrCannotRollBack, errNoSource)
	}
	target, err := rollbackTarget(r.cfg.Store.State(), req.Generation)
	if err != nil {
		return RollbackResult{}, err
	}
	res := RollbackResult{Target: target.Number, TargetCommit: target.Commit,
		Message: fmt.Sprintf("Revert to generation %d (%s)", target.Number, target.Commit)}
	if res.Commit, err = r.revert(ctx, target, rollbackMessage(res.Message, req.RequestedBy)); err != nil {
		pr, opened, perr := r.revertAsPull(ctx, res, err)
		switch {
		case opened && perr == nil:
			return pr, nil
		case opened:
			return RollbackResult{}, perr
		}
		return RollbackResult{}, err
	}
	res.Revision = r.loop.revision(res.Commit)
	r.log.Info("rollback pushed", "revision", res.Revision, "to_generation", target.Number,
		"to_revision", r.loop.revision(target.Commit))
	r.loop.Trigger()
	if req.Wait > 0 {
		res = r.waitForCommit(ctx, res, req.Wait)
	}
	return res, nil
}

// rollbackTarget picks and checks the generation to restore.
func rollbackTarget(st *raftstore.State, n uint64) (raftstore.Generation, error) {
	if n == 0 {
		if n = st.Previous; n == 0 {
			return raftstore.Generation{}, fmt.Errorf("%w: no generation was active before the active one (%d); name one to roll back to",
				ErrCannotRollBack, st.Active)
		}
	}
	g, ok := st.Generation(n)
	switch {
	case !ok:
		return g, fmt.Errorf("%w: generation %d is not known (the cluster keeps the last %d)",
			raftstore.ErrUnknownGeneration, n, raftstore.HistoryLimit)
	case g.State == raftstore.GenerationInvalid:
		return g, fmt.Errorf("%w: generation %d is INVALID and never served; choose a valid one", ErrCannotRollBack, n)
	case IsDirCommit(g.Commit):
		return g, fmt.Errorf("%w: generation %d was read from a directory (%s), not from a git commit, so there is no commit to revert to",
			ErrCannotRollBack, n, g.Commit)
	}
	if ref, ok := servedGeneration(st); ok && maps.Equal(ref.Etags, g.Etags) {
		return g, fmt.Errorf("%w: generation %d has the same policies as generation %d, which the cluster serves or is promoting; nothing to roll back",
			ErrCannotRollBack, n, ref.Number)
	}
	return g, nil
}

// servedGeneration is the generation whose policies main stands for: the
// staged one, else the active one; none while the newest is INVALID (main
// is broken, and restoring even the active generation's tree fixes it).
func servedGeneration(st *raftstore.State) (raftstore.Generation, bool) {
	if g, ok := st.Generation(st.Highest); ok && g.State == raftstore.GenerationInvalid {
		return raftstore.Generation{}, false
	}
	if g, ok := st.StagedGeneration(); ok {
		return g, true
	}
	return st.ActiveGeneration()
}

// revert writes and pushes the revert commit, rebuilding it when main
// moved in between.
func (r *Rollbacks) revert(ctx context.Context, target raftstore.Generation, msg string) (string, error) {
	var refused *gitsource.PushRefusedError
	for attempt := 1; ; attempt++ {
		commit, err := r.cfg.Source.Revert(ctx, gitsource.RevertRequest{ToHash: target.Commit, Message: msg, Now: r.cfg.Now()})
		switch {
		case err == nil:
			return commit, nil
		case errors.Is(err, gitsource.ErrNoChange):
			return "", fmt.Errorf("%w: %s already holds the policies of generation %d (head %s): %w",
				ErrCannotRollBack, r.cfg.Branch, target.Number, commit, err)
		case errors.As(err, &refused) && refused.Stale && attempt < staleRetries:
			continue
		case errors.As(err, &refused) && !refused.Stale:
			return "", &refusedError{refused: refused, msg: fmt.Sprintf("%v: the remote refused to update %s: %s. Pushing to %s may be protected: push the revert commit %s to a branch and open a pull request instead",
				gitsource.ErrPushRefused, refused.Ref, refused.Message, r.cfg.Branch, refused.Commit)}
		case errors.Is(err, gitsource.ErrUnknownRevision):
			return "", fmt.Errorf("%w: the commit of generation %d is not in the repository any more: %w",
				ErrCannotRollBack, target.Number, err)
		default:
			return "", err
		}
	}
}

// waitForCommit waits until the generation made from res.Commit is no
// longer STAGED (ACTIVE, INVALID, or superseded by a newer commit), at
// most wait, and fills in what it saw.
func (r *Rollbacks) waitForCommit(ctx context.Context, res RollbackResult, wait time.Duration) RollbackResult {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sub, unsubscribe := r.cfg.Store.Subscribe()
	defer unsubscribe()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if g, ok := generationOf(r.cfg.Store.State(), res.Commit); ok {
			res.Generation, res.State, res.Errors = g.Number, g.State, g.LeaderErrors
			if g.State != raftstore.GenerationStaged {
				return res
			}
		}
		select {
		case <-ctx.Done():
			return res
		case <-sub:
		case <-tick.C:
		}
	}
}

// WaitForCommit waits, at most wait, until the generation made from
// commit is no longer STAGED, and returns it (number 0 when none was
// recorded in time): the end of an experiment commit.
func (r *Rollbacks) WaitForCommit(ctx context.Context, commit string, wait time.Duration) raftstore.Generation {
	res := r.waitForCommit(ctx, RollbackResult{Commit: commit}, wait)
	return raftstore.Generation{Number: res.Generation, State: res.State, LeaderErrors: res.Errors}
}

// GenerationOf is the newest generation of st made from commit
// (experiments.Leader).
func (r *Rollbacks) GenerationOf(st *raftstore.State, commit string) (raftstore.Generation, bool) {
	return generationOf(st, commit)
}

// LiveAncestor reports whether commit is in the history of the active
// generation's commit, checked in the leader's clone (experiments.Leader):
// a left commit whose generation was superseded still went live.
func (r *Rollbacks) LiveAncestor(st *raftstore.State, commit string) bool {
	a, ok := r.cfg.Source.(ancestry)
	g, active := st.ActiveGeneration()
	if commit == "" || !ok || !active || g.Commit == "" || IsDirCommit(g.Commit) {
		return false
	}
	yes, err := a.IsAncestor(commit, g.Commit)
	return err == nil && yes
}

// generationOf is the newest generation made from commit.
func generationOf(st *raftstore.State, commit string) (raftstore.Generation, bool) {
	nums := st.GenerationNumbers()
	for i := len(nums) - 1; i >= 0; i-- {
		if g := st.Generations[nums[i]]; g.Commit == commit {
			return g, true
		}
	}
	return raftstore.Generation{}, false
}
