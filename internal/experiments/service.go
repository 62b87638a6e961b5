// Package experiments is the leader's AIP-236 experiment service: the
// create, update, delete, start/stopPreview and commit methods with their
// long-running operations, the experiments of branches and pull requests
// kept in step with what the reconcile pass computed, cascading deletes
// and the bounds on stored operations.
//
// Every change is decided here (times included) with the pure state
// machine of internal/preview and proposed to raft, so followers only read
// the experiments. Two kinds of callers change them:
//
//   - the reconcile pass (internal/reconcile): every branch other than the
//     live one, or with [github] every open pull request, that changes a
//     policy is the experiment "branch-<name>" or "pr-N" of that policy,
//     created, updated (new head commit; AutoStart when
//     preview.auto_start) and deleted as the sources move (SyncBranches,
//     SyncPulls); and a live policy deleted on main deletes its
//     experiments (Cascade) once that generation is active;
//   - the API and the comment commands (create, update, delete,
//     start/stopPreview, commit), each of which stores an Operation.
//
// One mutex serialises all of them, so each decision is taken on the state
// the previous one produced.
package experiments

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Store is what the service needs of the replicated state
// (raftstore.Store).
type Store interface {
	State() *raftstore.State
	Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)
}

// Leader is the reconcile loop as the service sees it: whether it leads
// here, a trigger for a pass after a commit, the trees and the checked
// writes of the live branch (the commit path, internal/reconcile), and
// the wait for the
// generation made from a commit (internal/reconcile.Loop).
type Leader interface {
	Leading() bool
	Trigger()
	// WaitForCommit waits, at most wait, until the generation made from
	// commit is no longer STAGED, and returns it (number 0 when none).
	WaitForCommit(ctx context.Context, commit string, wait time.Duration) raftstore.Generation
	// SourceFiles is the policies root a branch or pull request at head
	// previews: its merge into main, or on a conflict its own tree and
	// the conflict.
	SourceFiles(main, head string) (files map[string][]byte, conflict string, err error)
	// CommitToMain writes e to the live branch (a merge of its branch,
	// or its policy's directory), checked as a main commit first.
	CommitToMain(ctx context.Context, e *preview.Experiment, msg string) (string, error)
	// WithValidation is an API experiment with the validation of the tree
	// main would hold with it.
	WithValidation(e *preview.Experiment) *preview.Experiment
	// GenerationOf is the newest generation of st made from commit.
	GenerationOf(st *raftstore.State, commit string) (raftstore.Generation, bool)
	// LiveAncestor reports whether commit is in the history of the
	// active generation's commit (checked in the leader's clone).
	LiveAncestor(st *raftstore.State, commit string) bool
}

// PullRequests merges pull requests and knows their validity (the GitHub
// worker, internal/github); nil without [github].
type PullRequests interface {
	// MergePullRequest merges pull request n at head; a head that moved
	// is ABORTED, a pull request GitHub will not merge
	// FAILED_PRECONDITION.
	MergePullRequest(ctx context.Context, n int, head string) (string, error)
	// PullInvalid reports whether pull request n is known to be invalid
	// at head.
	PullInvalid(n int, head string) bool
	// PullUnapproved reports whether pull request n is from a user
	// without write permission and no writer approved head: its
	// experiments must not run (a missing record counts as unapproved).
	PullUnapproved(n int, head string) bool
}

// Config holds a Service's dependencies.
type Config struct {
	Store  Store
	Leader Leader
	// Pulls is set with [github].
	Pulls PullRequests
	// LoadOptions and EngineOptions load and check experiment policies;
	// every node compiles with the same ones.
	LoadOptions   policy.LoadOptions
	EngineOptions engine.Options
	// CheckPolicy compiles the policy of an experiment submitted through
	// the API or read from a branch or pull request, as
	// preview.CheckPolicy does, perhaps elsewhere:
	// `reconciler serve` sets sandbox.Runner.CheckPolicy, a child process
	// with a memory and time bound. nil checks in this process (tests of
	// internal packages, which have no reconciler binary to run).
	CheckPolicy PolicyChecker
	// MaxSourceRules bounds the rules the experiments of one branch or
	// pull request compile together; 0 means policy.MaxTreeRules, what a
	// generation may have.
	MaxSourceRules int
	// Preview holds the [preview] settings of experiments.
	Preview preview.Settings
	// Stats returns the cluster's merged preview stats, for autoStop's
	// request counts; nil counts none.
	Stats func() []preview.Stats
	// CommitWait bounds the wait of a commit for its generation to be
	// active; 0 means DefaultCommitWait.
	CommitWait time.Duration
	Logger     hclog.Logger
	Now        func() time.Time
}

// PolicyChecker answers whether a policy compiles: nil, INVALID_ARGUMENT
// with the problems, or (in a child process) RESOURCE_EXHAUSTED when
// compiling it exceeds the child's budget.
type PolicyChecker func(p *policy.Policy, opts engine.Options) error

// Service is the experiment service of the leader.
type Service struct {
	cfg Config
	log hclog.Logger

	// mu serialises the changes of experiments; merging marks the pull
	// request experiments being merged, under mu.
	mu      sync.Mutex
	merging map[string]bool
	// opMu orders the cancel and delete of operations with their
	// completion (operations_api.go).
	opMu sync.Mutex
	// commitWaits holds the names of the commit operations this node's
	// completeCommit waits for, which ResumeCommits leaves to it.
	commitWaits sync.Map
	// commits counts experiment commits pushed, so that a pass whose refs
	// predate one skips its branch experiment sync (Epoch).
	commits atomic.Uint64
	// apiChecks holds a slot per API policy check running (check.go).
	apiChecks chan struct{}

	// records stores the experiments and operations; sources keeps the
	// experiments of branches and pull requests in step (sync.go).
	records *records
	sources *sourceSync
}

// records are the experiment and operation documents in the replicated
// state: decoded, and written as one log entry per logical change.
type records struct {
	cfg *Config // the service's
	log hclog.Logger
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxSourceRules <= 0 {
		cfg.MaxSourceRules = policy.MaxTreeRules
	}
	if cfg.CheckPolicy == nil {
		cfg.CheckPolicy = preview.CheckPolicy
	}
	s := &Service{cfg: cfg, log: cfg.Logger, merging: map[string]bool{}, apiChecks: make(chan struct{}, maxAPIChecks)}
	// The parts share the service's Config, so what a test sets on it
	// after New reaches them too.
	s.records = &records{cfg: &s.cfg, log: s.log}
	s.sources = &sourceSync{cfg: &s.cfg, log: s.log, records: s.records}
	return s
}

// DefaultCommitWait bounds how long the leader waits, after pushing a
// commit's merge to the live branch, for the new generation to be active
// before it fails the operation.
const DefaultCommitWait = 2 * time.Minute

// Epoch counts the commits this service pushed.
func (s *Service) Epoch() uint64 { return s.commits.Load() }

// settings returns the [preview] settings of the state machine.
func (c *Config) settings() preview.Settings { return c.Preview }

// List returns the AIP experiments of the replicated state.
func (s *Service) List() []*preview.Experiment { return s.records.experiments(s.cfg.Store.State()) }

// experiments decodes the AIP experiments of st; bad documents are logged.
func (r *records) experiments(st *raftstore.State) []*preview.Experiment {
	exps, bad := preview.FromState(st)
	for _, err := range bad {
		r.log.Warn("skipping an experiment document that does not decode", "error", err)
	}
	return exps
}

// propose proposes ps as one log entry (a raftstore.Txn when there are
// several): one logical write, which no node and no next leader ever sees
// half of. what names the write in the error.
func (r *records) propose(ctx context.Context, what string, ps ...raftstore.Payload) error {
	p, err := raftstore.Batch(ps...)
	if err == nil && p != nil {
		_, err = r.cfg.Store.Propose(ctx, p)
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
func (r *records) putExperiment(ctx context.Context, e *preview.Experiment) error {
	p, err := experimentPut(e)
	if err != nil {
		return err
	}
	return r.propose(ctx, "storing "+e.Name, p)
}

// putOperation proposes op.
func (r *records) putOperation(ctx context.Context, op *preview.Operation) error {
	p, err := operationPut(op)
	if err != nil {
		return err
	}
	return r.propose(ctx, "storing "+op.Name, p)
}

// featureGate is the store's feature table (raftstore.Store.Allows).
type featureGate interface {
	Allows(t raftstore.CommandType, version uint8) bool
}

// putOperationOver proposes op in place of prior, the stored document
// op was decided from: a conditional write once every voter can apply
// one (raftstore.PutOperation version 2), so a write that lost a race
// with another leader's fails with raftstore.ErrConflict instead of
// overwriting it; before that, unconditionally, as 1.0.0 did.
func (r *records) putOperationOver(ctx context.Context, op *preview.Operation, prior raftstore.Operation) error {
	p, err := op.PutPayload()
	if err != nil {
		return err
	}
	if g, ok := r.cfg.Store.(featureGate); ok && g.Allows(raftstore.TypePutOperation, raftstore.ConditionalOperationVersion) {
		p.IfMatch = raftstore.OperationMatch(prior, true)
	}
	return r.propose(ctx, "storing "+op.Name, &p)
}

// deleteExperiment proposes, as one log entry, the delete of name, the
// experiments of its policy that were waiting for room under the cap
// (previewed now, and started with auto_start), and with (the operation
// of the delete or commit, when there is one).
func (r *records) deleteExperiment(ctx context.Context, name string, with ...raftstore.Payload) error {
	del := preview.DeletePayload(name)
	ps := []raftstore.Payload{&del}
	rest := slices.DeleteFunc(r.experiments(r.cfg.Store.State()), func(e *preview.Experiment) bool { return e.Name == name })
	pol, _, _ := preview.ParseName(name)
	now := r.cfg.Now()
	var previewed []string
	for _, e := range preview.Rebalance(rest, pol, r.cfg.settings()) {
		e = preview.AutoStart(e, r.cfg.settings(), now)
		p, err := experimentPut(e)
		if err != nil {
			return err
		}
		ps = append(ps, p)
		previewed = append(previewed, e.Name)
	}
	if err := r.propose(ctx, "deleting "+name, append(ps, with...)...); err != nil {
		return err
	}
	for _, n := range previewed {
		r.log.Info("experiment previewed: room under the cap", "experiment", n)
	}
	return nil
}

// Cascade deletes the experiments of every policy that was live in from
// and is not in to (AIP-236: deleting a live policy deletes its
// experiments). A live policy changed to a no-op keeps them.
func (s *Service) Cascade(ctx context.Context, from, to raftstore.Generation) {
	var gone []string
	for pol := range from.Etags {
		if _, ok := to.Etags[pol]; !ok {
			gone = append(gone, pol)
		}
	}
	if len(gone) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exps := s.records.experiments(s.cfg.Store.State())
	for _, pol := range gone {
		names := preview.CascadeDelete(exps, pol)
		ps := make([]raftstore.Payload, 0, len(names))
		for _, name := range names {
			p := preview.DeletePayload(name)
			ps = append(ps, &p)
		}
		if err := s.records.propose(ctx, "deleting the experiments of policies/"+pol, ps...); err != nil {
			s.log.Warn("cannot delete the experiments of a deleted policy", "policy", pol, "experiments", names, "error", err)
			continue
		}
		for _, name := range names {
			s.log.Info("live policy deleted; experiment deleted", "policy", pol, "experiment", name,
				"generation", to.Number)
		}
	}
}
