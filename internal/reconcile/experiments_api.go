package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// The experiment methods of the API (create, update, delete,
// start/stopPreview, commit); each stores a long-running Operation.

// leaderCheck answers raftstore.ErrNotLeader unless the loop runs here.
func (l *Loop) leaderCheck() error {
	if !l.leading.Load() {
		return fmt.Errorf("%w: this node's reconcile loop is not running", raftstore.ErrNotLeader)
	}
	return nil
}

// doneOperation is the done operation of method m on target, whose
// response is resp, and the payload that stores it.
func doneOperation(m preview.Method, target string, resp *preview.Experiment,
	now time.Time) (*preview.Operation, raftstore.Payload, error) {
	op := preview.NewOperation(preview.OperationID(m, target, now), m, target, now)
	done, err := op.Succeed(resp, now)
	if err != nil {
		return nil, nil, err
	}
	p, err := operationPut(done)
	return done, p, err
}

// checkInput compiles the policy of a create or update body for pol, off
// expMu (compiling takes milliseconds), so that a policy that does not
// compile is INVALID_ARGUMENT. A body naming another policy is left to
// preview.Create/Update, which refuse it.
func (l *Loop) checkInput(pol string, in preview.Input) error {
	if in.Policy == nil {
		return nil
	}
	c := *in.Policy
	if c.Name == "" {
		c.Name = pol
	}
	if c.Name != pol {
		return nil
	}
	return preview.CheckPolicy(&c, l.cfg.EngineOptions)
}

// CreateExperiment creates an API experiment under parent
// ("policies/{policy}") and, with auto_start, starts it. Problems with the
// request are *preview.Error (INVALID_ARGUMENT, ALREADY_EXISTS,
// RESOURCE_EXHAUSTED).
func (l *Loop) CreateExperiment(ctx context.Context, parent, id string, in preview.Input) (*preview.Operation, error) {
	if err := l.leaderCheck(); err != nil {
		return nil, err
	}
	if err := l.checkInput(strings.TrimPrefix(parent, "policies/"), in); err != nil {
		return nil, err
	}
	l.expMu.Lock()
	defer l.expMu.Unlock()
	now := l.cfg.Now()
	e, err := preview.Create(l.experiments(l.cfg.Store.State()), preview.CreateRequest{Parent: parent, ExperimentID: id,
		Policy: in.Policy, Annotations: in.Annotations, Source: preview.Source{Kind: preview.SourceAPI}},
		l.settings(), now)
	if err != nil {
		return nil, err
	}
	return l.save(ctx, preview.MethodCreate, preview.AutoStart(l.withValidation(e), l.settings(), now), now)
}

// UpdateExperiment changes the policy and/or annotations of an experiment
// (AIP-236 update: an ACTIVE one is suspended, then restarted with
// auto_start).
func (l *Loop) UpdateExperiment(ctx context.Context, name string, in preview.Input) (*preview.Operation, error) {
	if err := l.leaderCheck(); err != nil {
		return nil, err
	}
	if in.Policy != nil {
		pol, _, err := preview.ParseName(name)
		if err != nil {
			return nil, err
		}
		if err := l.checkInput(pol, in); err != nil {
			return nil, err
		}
	}
	return l.change(name, func(cur *preview.Experiment, now time.Time) (*preview.Operation, error) {
		if err := readOnlyPolicy(cur, in); err != nil {
			return nil, err
		}
		e, err := preview.Update(cur, preview.UpdateRequest{Policy: in.Policy, Annotations: in.Annotations, Etag: in.Etag}, now)
		if err != nil {
			return nil, err
		}
		if in.Policy != nil {
			e = l.withValidation(e)
		}
		return l.save(ctx, preview.MethodUpdate, preview.AutoStart(e, l.settings(), now), now)
	})
}

// DeleteExperiment deletes an experiment (etag, when given, must match).
func (l *Loop) DeleteExperiment(ctx context.Context, name, etag string) (*preview.Operation, error) {
	if err := l.leaderCheck(); err != nil {
		return nil, err
	}
	return l.change(name, func(cur *preview.Experiment, now time.Time) (*preview.Operation, error) {
		e, err := preview.Delete(cur, etag)
		if err != nil {
			return nil, err
		}
		op, opPut, err := doneOperation(preview.MethodDelete, name, e, now)
		if err != nil {
			return nil, err
		}
		if err := l.deleteExperiment(ctx, name, opPut); err != nil {
			return nil, err
		}
		l.log.Info("experiment deleted", "experiment", name)
		return op, nil
	})
}

// StartPreview starts previewing an experiment.
func (l *Loop) StartPreview(ctx context.Context, name string) (*preview.Operation, error) {
	return l.setPreview(ctx, name, preview.MethodStartPreview, preview.StartPreview)
}

// StopPreview stops previewing an experiment.
func (l *Loop) StopPreview(ctx context.Context, name string) (*preview.Operation, error) {
	return l.setPreview(ctx, name, preview.MethodStopPreview, preview.StopPreview)
}

func (l *Loop) setPreview(ctx context.Context, name string, m preview.Method,
	fn func(*preview.Experiment, time.Time) (*preview.Experiment, error)) (*preview.Operation, error) {
	if err := l.leaderCheck(); err != nil {
		return nil, err
	}
	return l.change(name, func(cur *preview.Experiment, now time.Time) (*preview.Operation, error) {
		e, err := fn(cur, now)
		if err != nil {
			return nil, err
		}
		return l.save(ctx, m, e, now)
	})
}

// change runs fn on the current version of experiment name (NOT_FOUND
// when there is none) under expMu, so that it sees the version it
// replaces; the shared body of update, delete and start/stopPreview.
func (l *Loop) change(name string, fn func(cur *preview.Experiment, now time.Time) (*preview.Operation, error)) (*preview.Operation, error) {
	l.expMu.Lock()
	defer l.expMu.Unlock()
	now := l.cfg.Now()
	cur, err := preview.Get(l.experiments(l.cfg.Store.State()), name)
	if err != nil {
		return nil, err
	}
	return fn(cur, now)
}

// save writes e as method m left it and returns m's finished operation.
func (l *Loop) save(ctx context.Context, m preview.Method, e *preview.Experiment, now time.Time) (*preview.Operation, error) {
	op, opPut, err := doneOperation(m, e.Name, e, now)
	if err != nil {
		return nil, err
	}
	put, err := experimentPut(e)
	if err != nil {
		return nil, err
	}
	if err := l.propose(ctx, "storing "+e.Name, put, opPut); err != nil {
		return nil, err
	}
	l.log.Info("experiment saved", "method", m, "experiment", e.Name, "etag", e.Etag, "active", e.IsActive())
	return op, nil
}

// CommitExperiment promotes an experiment to live (AIP-236 commit). The
// checks (etag required and current, parentEtag the live etag) run first;
// a branch or API experiment is then written to the live branch as one
// commit replacing the policy's directory, the experiment is deleted, and
// the returned operation (not done yet) completes when the generation made
// from that commit is active, or fails when it is not within the commit
// wait. A failed push changes nothing: the experiment keeps previewing and
// the live policy stays as it was. A pull request experiment is committed
// by merging its pull request (commitPullExperiment).
func (l *Loop) CommitExperiment(ctx context.Context, name string, req preview.CommitRequest) (*preview.Operation, error) {
	if err := l.leaderCheck(); err != nil {
		return nil, err
	}
	l.expMu.Lock()
	defer l.expMu.Unlock()
	st := l.cfg.Store.State()
	pol, _, err := preview.ParseName(name)
	if err != nil {
		return nil, err
	}
	cur, _ := preview.Get(l.experiments(st), name)
	liveEtag := ""
	if g, ok := st.ActiveGeneration(); ok {
		liveEtag = g.Etags[pol]
	}
	plan, err := preview.Commit(cur, liveEtag, req)
	if err != nil {
		return nil, err
	}
	if cur.Source.Kind == preview.SourcePullRequest {
		if l.merging[name] {
			return nil, &preview.Error{Code: preview.Aborted, Msg: fmt.Sprintf(
				"a commit of %s is in progress (GitHub is merging its pull request)", name)}
		}
		return l.commitPullExperiment(ctx, cur, plan)
	}
	now := l.cfg.Now()
	op := preview.NewOperation(preview.OperationID(preview.MethodCommit, name, now), preview.MethodCommit, name, now)
	msg := fmt.Sprintf("Commit experiment %s (etag %s)", name, cur.Etag)
	if cur.Source.Kind == preview.SourceBranch {
		msg = fmt.Sprintf("Merge branch %s: commit experiment %s (%s)", cur.Source.Branch, name, cur.Source.HeadCommit)
	}
	commit, err := l.commitToMain(ctx, cur, msg)
	if err != nil {
		_ = l.putOperation(ctx, op.Fail(err, l.cfg.Now()))
		l.log.Warn("commit of experiment failed; nothing changed", "experiment", name, "error", err)
		return nil, err
	}
	l.commits.Add(1)
	op.Metadata.Commit = commit
	opPut, err := operationPut(op)
	if err != nil {
		return nil, err
	}
	if err := l.deleteExperiment(ctx, plan.Delete, opPut); err != nil {
		return nil, err
	}
	l.log.Info("experiment committed", "experiment", name, "etag", cur.Etag, "revision", l.revision(commit))
	l.Trigger()
	go l.completeCommit(op, commit)
	return op, nil
}

// commitPullExperiment commits a pull request experiment as
// `/reconciler commit` does: GitHub merges pull request N at the head
// commit the experiment's etag was computed from (MergePullRequest). A
// head that moved is ABORTED, a pull request GitHub will not merge (or an
// invalid tree, or no [github]) FAILED_PRECONDITION; nothing changes then.
// Otherwise the experiment is deleted and the operation completes when
// the generation of the merge commit is active.
//
// Called with expMu held, which it releases while GitHub merges: a slow or
// rate-limited GitHub must not hold up the reconcile pass (and with it
// promotion) or the other experiments. GitHub's sha check keeps the merge
// to the previewed head whatever changes meanwhile; merging marks the
// experiment so a second commit is refused until this one is over.
func (l *Loop) commitPullExperiment(ctx context.Context, cur *preview.Experiment, plan preview.CommitPlan) (*preview.Operation, error) {
	n, name := cur.Source.Number, cur.Name
	if rec, ok := ReadPullRecords(l.cfg.Store.State())[n]; ok && rec.HeadCommit == cur.Source.HeadCommit && !rec.Validation.Valid {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"the policies of pull request #%d are invalid (see reconciler/validate); nothing was merged", n)}
	}
	now := l.cfg.Now()
	op := preview.NewOperation(preview.OperationID(preview.MethodCommit, name, now), preview.MethodCommit, name, now)
	l.merging[name] = true
	l.expMu.Unlock()
	sha, err := l.MergePullRequest(ctx, n, cur.Source.HeadCommit)
	l.expMu.Lock()
	delete(l.merging, name)
	if err != nil {
		_ = l.putOperation(ctx, op.Fail(err, l.cfg.Now()))
		l.log.Warn("commit of pull request experiment failed; nothing changed", "experiment", name, "pull", n, "error", err)
		return nil, err
	}
	op.Metadata.Commit = sha
	opPut, err := operationPut(op)
	if err != nil {
		return nil, err
	}
	if err := l.deleteExperiment(ctx, plan.Delete, opPut); err != nil {
		return nil, err
	}
	l.log.Info("experiment committed by merging its pull request", "experiment", name, "etag", cur.Etag,
		"pull", n, "head", cur.Source.HeadCommit, "merge_commit", sha)
	go l.completeCommit(op, sha)
	return op, nil
}

// completeCommit waits (bounded) for the generation of commit and
// completes op.
func (l *Loop) completeCommit(op *preview.Operation, commit string) {
	wait := l.cfg.CommitWait
	if wait <= 0 {
		wait = DefaultCommitWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	l.commitWaits.Store(op.Name, struct{}{})
	defer l.commitWaits.Delete(op.Name)
	res := l.waitForCommit(ctx, RollbackResult{Commit: commit}, wait)
	now := l.cfg.Now()
	var done *preview.Operation
	if res.Generation != 0 {
		done = commitOutcome(op, commit, raftstore.Generation{Number: res.Generation, State: res.State,
			LeaderErrors: res.Errors}, now)
	}
	if done == nil {
		done = op.Fail(&preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"commit %s was pushed but its generation was not active within %s", commit, wait)}, now)
	}
	if doc, ok := l.cfg.Store.State().Operations[strings.TrimPrefix(op.Name, "operations/")]; ok {
		if cur, err := preview.DecodeOperation(doc.Data); err == nil && cur.Done {
			return // completed by a leader meanwhile (resumeCommits)
		}
	}
	if err := l.putOperation(ctx, done); err != nil {
		l.log.Warn("cannot complete the commit operation", "operation", op.Name, "error", err)
	}
}
