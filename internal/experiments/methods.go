package experiments

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
func (s *Service) leaderCheck() error {
	if s.cfg.Leader == nil || !s.cfg.Leader.Leading() {
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

// CreateExperiment creates an API experiment under parent
// ("policies/{policy}") and, with auto_start, starts it. Problems with the
// request are *preview.Error (INVALID_ARGUMENT, ALREADY_EXISTS,
// RESOURCE_EXHAUSTED).
func (s *Service) CreateExperiment(ctx context.Context, parent, id string, in preview.Input) (*preview.Operation, error) {
	if err := s.leaderCheck(); err != nil {
		return nil, err
	}
	if live := s.livePolicy(s.cfg.Store.State(), strings.TrimPrefix(parent, "policies/")); live != nil {
		in = withLists(withTests(in, live.Tests), live)
	}
	if err := s.checkInput(ctx, strings.TrimPrefix(parent, "policies/"), in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	e, err := preview.Create(s.records.experiments(s.cfg.Store.State()), preview.CreateRequest{Parent: parent, ExperimentID: id,
		Policy: in.Policy, Annotations: in.Annotations, Source: preview.Source{Kind: preview.SourceAPI}, AutoStop: in.AutoStop},
		s.cfg.settings(), now)
	if err != nil {
		return nil, err
	}
	return s.save(ctx, preview.MethodCreate, preview.AutoStart(s.cfg.Leader.WithValidation(e), s.cfg.settings(), now), now)
}

// UpdateExperiment changes the policy and/or annotations of an experiment
// (AIP-236 update: an ACTIVE one is suspended, then restarted with
// auto_start).
func (s *Service) UpdateExperiment(ctx context.Context, name string, in preview.Input) (*preview.Operation, error) {
	if err := s.leaderCheck(); err != nil {
		return nil, err
	}
	if in.Policy != nil {
		pol, _, err := preview.ParseName(name)
		if err != nil {
			return nil, err
		}
		in = withLists(in, s.livePolicy(s.cfg.Store.State(), pol))
		if err := s.checkInput(ctx, pol, in); err != nil {
			return nil, err
		}
	}
	return s.change(name, func(cur *preview.Experiment, now time.Time) (*preview.Operation, error) {
		if err := readOnlyPolicy(cur, in); err != nil {
			return nil, err
		}
		if cur.Policy != nil {
			in = withTests(in, cur.Policy.Tests) // PATCH: a field left out is unchanged
		}
		e, err := preview.Update(cur, preview.UpdateRequest{Policy: in.Policy, Annotations: in.Annotations, Etag: in.Etag,
			AutoStop: in.AutoStop}, now)
		if err != nil {
			return nil, err
		}
		if in.Policy != nil {
			e = s.cfg.Leader.WithValidation(e)
		}
		// An update is no approval: a held pull request's experiment
		// starts only when a writer approves its head (startPreview).
		if !s.sources.unapproved(e.Source) {
			e = preview.AutoStart(e, s.cfg.settings(), now)
		}
		return s.save(ctx, preview.MethodUpdate, e, now)
	})
}

// DeleteExperiment deletes an experiment (etag, when given, must match).
func (s *Service) DeleteExperiment(ctx context.Context, name, etag string) (*preview.Operation, error) {
	if err := s.leaderCheck(); err != nil {
		return nil, err
	}
	return s.change(name, func(cur *preview.Experiment, now time.Time) (*preview.Operation, error) {
		e, err := preview.Delete(cur, etag)
		if err != nil {
			return nil, err
		}
		op, opPut, err := doneOperation(preview.MethodDelete, name, e, now)
		if err != nil {
			return nil, err
		}
		with := []raftstore.Payload{opPut}
		if d := s.dismissalPut(s.cfg.Store.State(), cur); d != nil {
			with = append(with, d)
		}
		if err := s.records.deleteExperiment(ctx, name, with...); err != nil {
			return nil, err
		}
		s.log.Info("experiment deleted", "experiment", name)
		return op, nil
	})
}

// StartPreview starts previewing an experiment, unless it is an
// unapproved pull request's (startPreview).
func (s *Service) StartPreview(ctx context.Context, name string) (*preview.Operation, error) {
	return s.setPreview(ctx, name, preview.MethodStartPreview, s.startPreview(""))
}

// StopPreview stops previewing an experiment.
func (s *Service) StopPreview(ctx context.Context, name string) (*preview.Operation, error) {
	return s.setPreview(ctx, name, preview.MethodStopPreview, preview.StopPreview)
}

func (s *Service) setPreview(ctx context.Context, name string, m preview.Method,
	fn func(*preview.Experiment, time.Time) (*preview.Experiment, error)) (*preview.Operation, error) {
	if err := s.leaderCheck(); err != nil {
		return nil, err
	}
	return s.change(name, func(cur *preview.Experiment, now time.Time) (*preview.Operation, error) {
		e, err := fn(cur, now)
		if err != nil {
			return nil, err
		}
		return s.save(ctx, m, e, now)
	})
}

// change runs fn on the current version of experiment name (NOT_FOUND
// when there is none) under expMu, so that it sees the version it
// replaces; the shared body of update, delete and start/stopPreview.
func (s *Service) change(name string, fn func(cur *preview.Experiment, now time.Time) (*preview.Operation, error)) (*preview.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	cur, err := preview.Get(s.records.experiments(s.cfg.Store.State()), name)
	if err != nil {
		return nil, err
	}
	return fn(cur, now)
}

// save writes e as method m left it and returns m's finished operation.
func (s *Service) save(ctx context.Context, m preview.Method, e *preview.Experiment, now time.Time) (*preview.Operation, error) {
	op, opPut, err := doneOperation(m, e.Name, e, now)
	if err != nil {
		return nil, err
	}
	put, err := experimentPut(e)
	if err != nil {
		return nil, err
	}
	if err := s.records.propose(ctx, "storing "+e.Name, put, opPut); err != nil {
		return nil, err
	}
	s.log.Info("experiment saved", "method", m, "experiment", e.Name, "etag", e.Etag, "active", e.IsActive())
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
func (s *Service) CommitExperiment(ctx context.Context, name string, req preview.CommitRequest) (*preview.Operation, error) {
	if err := s.leaderCheck(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.cfg.Store.State()
	pol, _, err := preview.ParseName(name)
	if err != nil {
		return nil, err
	}
	cur, _ := preview.Get(s.records.experiments(st), name)
	liveEtag := ""
	if g, ok := st.ActiveGeneration(); ok {
		liveEtag = g.Etags[pol]
	}
	plan, err := preview.Commit(cur, liveEtag, req)
	if err != nil {
		return nil, err
	}
	removed := testsRemoved(s.livePolicy(st, pol), cur.Policy)
	if cur.Source.Kind == preview.SourcePullRequest {
		if s.merging[name] {
			return nil, &preview.Error{Code: preview.Aborted, Msg: fmt.Sprintf(
				"a commit of %s is in progress (GitHub is merging its pull request)", name)}
		}
		return s.commitPullExperiment(ctx, cur, plan, removed)
	}
	now := s.cfg.Now()
	op := preview.NewOperation(preview.OperationID(preview.MethodCommit, name, now), preview.MethodCommit, name, now)
	op.Metadata.TestsRemoved = removed
	msg := fmt.Sprintf("Commit experiment %s (etag %s)", name, cur.Etag)
	if cur.Source.Kind == preview.SourceBranch {
		msg = fmt.Sprintf("Merge branch %s: commit experiment %s (%s)", cur.Source.Branch, name, cur.Source.HeadCommit)
	}
	commit, err := s.cfg.Leader.CommitToMain(ctx, cur, msg)
	if err != nil {
		_ = s.records.putOperation(ctx, op.Fail(err, s.cfg.Now()))
		s.log.Warn("commit of experiment failed; nothing changed", "experiment", name, "error", err)
		return nil, err
	}
	s.commits.Add(1)
	op.Metadata.Commit = commit
	opPut, err := operationPut(op)
	if err != nil {
		return nil, err
	}
	if err := s.records.deleteExperiment(ctx, plan.Delete, opPut); err != nil {
		return nil, err
	}
	s.log.Info("experiment committed", "experiment", name, "etag", cur.Etag, "commit", commit)
	s.cfg.Leader.Trigger()
	go s.completeCommit(op, commit)
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
func (s *Service) commitPullExperiment(ctx context.Context, cur *preview.Experiment, plan preview.CommitPlan,
	removed *int) (*preview.Operation, error) {
	n, name := cur.Source.Number, cur.Name
	if s.cfg.Pulls == nil {
		return nil, &preview.Error{Code: preview.FailedPrecondition,
			Msg: fmt.Sprintf("pull request #%d can only be merged on GitHub: the GitHub integration ([github]) is not configured", n)}
	}
	if s.cfg.Pulls.PullInvalid(n, cur.Source.HeadCommit) {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"the policies of pull request #%d are invalid (see reconciler/validate); nothing was merged", n)}
	}
	now := s.cfg.Now()
	op := preview.NewOperation(preview.OperationID(preview.MethodCommit, name, now), preview.MethodCommit, name, now)
	op.Metadata.TestsRemoved = removed
	s.merging[name] = true
	s.mu.Unlock()
	sha, err := s.cfg.Pulls.MergePullRequest(ctx, n, cur.Source.HeadCommit)
	s.mu.Lock()
	delete(s.merging, name)
	if err != nil {
		_ = s.records.putOperation(ctx, op.Fail(err, s.cfg.Now()))
		s.log.Warn("commit of pull request experiment failed; nothing changed", "experiment", name, "pull", n, "error", err)
		return nil, err
	}
	op.Metadata.Commit = sha
	opPut, err := operationPut(op)
	if err != nil {
		return nil, err
	}
	if err := s.records.deleteExperiment(ctx, plan.Delete, opPut); err != nil {
		return nil, err
	}
	s.log.Info("experiment committed by merging its pull request", "experiment", name, "etag", cur.Etag,
		"pull", n, "head", cur.Source.HeadCommit, "merge_commit", sha)
	go s.completeCommit(op, sha)
	return op, nil
}

// completeCommit waits (bounded) for the generation of commit and
// completes op.
func (s *Service) completeCommit(op *preview.Operation, commit string) {
	wait := s.cfg.CommitWait
	if wait <= 0 {
		wait = DefaultCommitWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	s.commitWaits.Store(op.Name, struct{}{})
	defer s.commitWaits.Delete(op.Name)
	g := s.cfg.Leader.WaitForCommit(ctx, commit, wait)
	now := s.cfg.Now()
	var done *preview.Operation
	if g.Number != 0 {
		done = commitOutcome(op, commit, g, now)
	}
	if done == nil {
		done = op.Fail(&preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"commit %s was pushed but its generation was not active within %s", commit, wait)}, now)
	}
	// Completed by a leader meanwhile (resumeCommits) or cancelled: left as is.
	if _, err := s.completeIfRunning(ctx, done); err != nil {
		s.log.Warn("cannot complete the commit operation", "operation", op.Name, "error", err)
	}
}

// readOnlyPolicy refuses a change of the policy of a git-backed
// experiment: its policy is its source's (the next pass would undo it),
// so it changes by pushing to the branch or pull request.
func readOnlyPolicy(cur *preview.Experiment, in preview.Input) error {
	if in.Policy == nil || cur.Source.Kind == preview.SourceAPI || cur.Source.Kind == "" {
		return nil
	}
	what := fmt.Sprintf("branch %q", cur.Source.Branch)
	if cur.Source.Kind == preview.SourcePullRequest {
		what = fmt.Sprintf("pull request #%d", cur.Source.Number)
	}
	return &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
		"the policy of %s comes from %s: push to it to change the policy (annotations may be changed here)", cur.Name, what)}
}
