package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// The leader keeps the AIP-236 experiments (internal/preview) in the
// replicated state: every change is decided here (times included) with the
// pure state machine of internal/preview and proposed to raft, so followers
// only read them. Two kinds of callers change experiments:
//
//   - the reconcile pass: every branch other than the live one that changes
//     a policy is the experiment "branch-<name>" of that policy, created,
//     updated (new head commit; AutoStart when preview.auto_start) and
//     deleted as branches move; and a live policy deleted on main deletes
//     its experiments (CascadeDelete) once that generation is active;
//   - the API (create, update, delete, start/stopPreview, commit), through
//     the methods below, each of which stores a long-running Operation.
//
// expMu serialises all of them, so each decision is taken on the state the
// previous one produced.

// DefaultCommitWait bounds how long the leader waits, after pushing a
// commit's merge to the live branch, for the new generation to be active
// before it fails the operation.
const DefaultCommitWait = 2 * time.Minute

// ErrNoCommitter means the policy source cannot write commits.
var ErrNoCommitter = errors.New("the policy source cannot write commits")

// PolicyCommitter is a Source that can replace a policy directory on the
// live branch in one commit (gitsource.Source.CommitPolicy).
type PolicyCommitter interface {
	CommitPolicy(ctx context.Context, req gitsource.CommitPolicyRequest) (string, error)
}

// CommitPolicy implements PolicyCommitter, apart from history walks as
// Revert is.
func (g *GitSource) CommitPolicy(ctx context.Context, req gitsource.CommitPolicyRequest) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Source.CommitPolicy(ctx, req)
}

// settings returns the [preview] settings of the state machine.
func (l *Loop) settings() preview.Settings { return l.cfg.Preview }

// experiments decodes the AIP experiments of st; bad documents are logged.
func (l *Loop) experiments(st *raftstore.State) []*preview.Experiment {
	exps, errs := preview.FromState(st)
	for _, err := range errs {
		l.log.Warn("skipping an experiment document that does not decode", "error", err)
	}
	return exps
}

// proposePut proposes the put payload p (err is the error making it) of
// the document name: the shared body of putExperiment and putOperation.
func proposePut[P any, PP interface {
	*P
	raftstore.Payload
}](ctx context.Context, l *Loop, name string, p P, err error) error {
	if err != nil {
		return err
	}
	if _, err := l.cfg.Store.Propose(ctx, PP(&p)); err != nil {
		return fmt.Errorf("storing %s: %w", name, err)
	}
	return nil
}

// putExperiment proposes e.
func (l *Loop) putExperiment(ctx context.Context, e *preview.Experiment) error {
	p, err := e.PutPayload()
	return proposePut(ctx, l, e.Name, p, err)
}

// putOperation proposes op.
func (l *Loop) putOperation(ctx context.Context, op *preview.Operation) error {
	p, err := op.PutPayload()
	return proposePut(ctx, l, op.Name, p, err)
}

// deleteExperiment proposes the delete of name and previews the
// experiments of its policy that were waiting for room under the cap.
func (l *Loop) deleteExperiment(ctx context.Context, name string) error {
	p := preview.DeletePayload(name)
	if _, err := l.cfg.Store.Propose(ctx, &p); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	pol, _, _ := preview.ParseName(name)
	return l.rebalance(ctx, pol)
}

// rebalance previews (and, with auto_start, starts) the experiments of
// pol that now fit under the cap.
func (l *Loop) rebalance(ctx context.Context, pol string) error {
	now := l.cfg.Now()
	for _, e := range preview.Rebalance(l.experiments(l.cfg.Store.State()), pol, l.settings()) {
		e = preview.AutoStart(e, l.settings(), now)
		if err := l.putExperiment(ctx, e); err != nil {
			return err
		}
		l.log.Info("experiment previewed: room under the cap", "experiment", e.Name)
	}
	return nil
}

// cascade deletes the experiments of every policy that was live in from
// and is not in to (AIP-236: deleting a live policy deletes its
// experiments). A live policy changed to a no-op keeps them.
func (l *Loop) cascade(ctx context.Context, from, to raftstore.Generation) {
	var gone []string
	for pol := range from.Etags {
		if _, ok := to.Etags[pol]; !ok {
			gone = append(gone, pol)
		}
	}
	if len(gone) == 0 {
		return
	}
	l.expMu.Lock()
	defer l.expMu.Unlock()
	exps := l.experiments(l.cfg.Store.State())
	for _, pol := range gone {
		for _, name := range preview.CascadeDelete(exps, pol) {
			p := preview.DeletePayload(name)
			if _, err := l.cfg.Store.Propose(ctx, &p); err != nil {
				l.log.Warn("cannot delete the experiment of a deleted policy", "experiment", name, "error", err)
				continue
			}
			l.log.Info("live policy deleted; experiment deleted", "policy", pol, "experiment", name,
				"generation", to.Number)
		}
	}
}
