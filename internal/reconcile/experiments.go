package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// propose proposes ps as one log entry (a raftstore.Txn when there are
// several): one logical write, which no node and no next leader ever sees
// half of. what names the write in the error.
func (l *Loop) propose(ctx context.Context, what string, ps ...raftstore.Payload) error {
	p, err := raftstore.Batch(ps...)
	if err == nil && p != nil {
		_, err = l.cfg.Store.Propose(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// experimentPut is the payload that stores e.
func experimentPut(e *preview.Experiment) (raftstore.Payload, error) {
	p, err := e.PutPayload()
	return &p, err
}

// operationPut is the payload that stores op.
func operationPut(op *preview.Operation) (raftstore.Payload, error) {
	p, err := op.PutPayload()
	return &p, err
}

// putExperiment proposes e.
func (l *Loop) putExperiment(ctx context.Context, e *preview.Experiment) error {
	p, err := experimentPut(e)
	if err != nil {
		return err
	}
	return l.propose(ctx, "storing "+e.Name, p)
}

// putOperation proposes op.
func (l *Loop) putOperation(ctx context.Context, op *preview.Operation) error {
	p, err := operationPut(op)
	if err != nil {
		return err
	}
	return l.propose(ctx, "storing "+op.Name, p)
}

// deleteExperiment proposes, as one log entry, the delete of name, the
// experiments of its policy that were waiting for room under the cap
// (previewed now, and started with auto_start), and with (the operation
// of the delete or commit, when there is one).
func (l *Loop) deleteExperiment(ctx context.Context, name string, with ...raftstore.Payload) error {
	del := preview.DeletePayload(name)
	ps := []raftstore.Payload{&del}
	rest := slices.DeleteFunc(l.experiments(l.cfg.Store.State()), func(e *preview.Experiment) bool { return e.Name == name })
	pol, _, _ := preview.ParseName(name)
	now := l.cfg.Now()
	var previewed []string
	for _, e := range preview.Rebalance(rest, pol, l.settings()) {
		e = preview.AutoStart(e, l.settings(), now)
		p, err := experimentPut(e)
		if err != nil {
			return err
		}
		ps = append(ps, p)
		previewed = append(previewed, e.Name)
	}
	if err := l.propose(ctx, "deleting "+name, append(ps, with...)...); err != nil {
		return err
	}
	for _, n := range previewed {
		l.log.Info("experiment previewed: room under the cap", "experiment", n)
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
		names := preview.CascadeDelete(exps, pol)
		ps := make([]raftstore.Payload, 0, len(names))
		for _, name := range names {
			p := preview.DeletePayload(name)
			ps = append(ps, &p)
		}
		if err := l.propose(ctx, "deleting the experiments of policies/"+pol, ps...); err != nil {
			l.log.Warn("cannot delete the experiments of a deleted policy", "policy", pol, "experiments", names, "error", err)
			continue
		}
		for _, name := range names {
			l.log.Info("live policy deleted; experiment deleted", "policy", pol, "experiment", name,
				"generation", to.Number)
		}
	}
}
