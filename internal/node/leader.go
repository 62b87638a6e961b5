package node

import (
	"context"
	"time"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/github"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// wireLeader builds the leader's three parts, which call each other
// through small interfaces: the reconcile loop (internal/reconcile), the
// experiment service (internal/experiments) and, with [github], the
// GitHub worker (internal/github). loopRef and pullsRef let each be built
// before the one it calls.
func (m *Main) wireLeader(src *reconcile.GitSource, lopts policy.LoadOptions, eopts engine.Options) error {
	cfg := m.Config
	gh, err := m.githubConfig()
	if err != nil {
		return err
	}
	var pulls experiments.PullRequests
	if gh != nil {
		pulls = pullsRef{m}
	}
	m.experiments = experiments.New(experiments.Config{
		Store: m.store, Leader: loopRef{m}, Pulls: pulls,
		LoadOptions: lopts, EngineOptions: eopts, CheckPolicy: m.CheckPolicy,
		Preview: preview.Settings{AutoStart: cfg.Preview.AutoStart, MaxPerPolicy: cfg.Preview.MaxExperimentsPerPolicy,
			MaxTotal: cfg.Preview.MaxExperiments, AutoStop: preview.AutoStop{
				Duration: preview.Duration{D: cfg.Preview.AutoStopAfter.Duration}, Requests: cfg.Preview.AutoStopRequests}},
		Stats:  m.mergedPreviewStats,
		Logger: m.Logger.Named(logging.Reconcile).Named(logging.Experiments),
	})
	lc := reconcile.Config{
		Store: m.store, Members: m.cluster, Source: src, Verify: commitVerifier(src, cfg.Git), Poll: cfg.Git.Poll,
		Branch: cfg.Git.Branch, URL: gitsource.Redact(cfg.Git.URL),
		LoadOptions: lopts, EngineOptions: eopts, Validator: m.Validator, Experiments: m.experiments,
		Registry: m.registry, Logger: m.Logger.Named(logging.Reconcile),
	}
	if gh != nil {
		gh.Store, gh.Examiner, gh.Experiments, gh.Trigger = m.store, loopRef{m}, m.experiments, loopRef{m}.Trigger
		gh.Branch, gh.Logger = cfg.Git.Branch, m.Logger.Named(logging.Reconcile)
		if m.github, err = github.New(*gh); err != nil {
			return err
		}
		lc.Pulls, lc.PullRequests, lc.Beside = m.github, gh.Forge, []lifecycle.Part{m.github}
	}
	m.loop, err = reconcile.New(lc)
	return err
}

// loopRef is the reconcile loop for the parts built before it.
type loopRef struct{ m *Main }

func (r loopRef) Leading() bool { return r.m.loop.Leading() }

func (r loopRef) Trigger() { r.m.loop.Trigger() }

func (r loopRef) WaitForCommit(ctx context.Context, commit string, wait time.Duration) raftstore.Generation {
	return r.m.loop.Rollbacks().WaitForCommit(ctx, commit, wait)
}

func (r loopRef) Examine(head, main gitsource.Revision) (reconcile.Examination, error) {
	return r.m.loop.Trees().Examine(head, main)
}

func (r loopRef) GenerationOf(st *raftstore.State, commit string) (raftstore.Generation, bool) {
	return r.m.loop.Rollbacks().GenerationOf(st, commit)
}

func (r loopRef) LiveAncestor(st *raftstore.State, commit string) bool {
	return r.m.loop.Rollbacks().LiveAncestor(st, commit)
}

func (r loopRef) Diverged() *reconcile.Divergence { return r.m.loop.Diverged() }

func (r loopRef) SourceFiles(main, head string) (map[string][]byte, string, error) {
	return r.m.loop.Trees().SourceFiles(main, head)
}

func (r loopRef) CommitToMain(ctx context.Context, e *preview.Experiment, msg string) (string, error) {
	return r.m.loop.Committer().CommitToMain(ctx, e, msg)
}

func (r loopRef) WithValidation(e *preview.Experiment) *preview.Experiment {
	return r.m.loop.Committer().WithValidation(e)
}

// pullsRef is the GitHub worker for the experiment service built before it.
type pullsRef struct{ m *Main }

func (r pullsRef) MergePullRequest(ctx context.Context, n int, head string) (string, error) {
	return r.m.github.MergePullRequest(ctx, n, head)
}

func (r pullsRef) PullInvalid(n int, head string) bool { return r.m.github.PullInvalid(n, head) }

func (r pullsRef) PullUnapproved(n int, head string) bool { return r.m.github.PullUnapproved(n, head) }

// rollbacks is the leader loop's rollback as the API declares it.
type rollbacks struct{ m *Main }

func (r rollbacks) AcceptHistory(ctx context.Context, commit string) error {
	return r.m.loop.AcceptHistory(ctx, commit)
}

func (r rollbacks) Rollback(ctx context.Context, req api.RollbackRequest) (api.RollbackResult, error) {
	return r.m.loop.Rollbacks().Rollback(ctx, req)
}

var (
	_ api.Rollbacker           = rollbacks{}
	_ api.HistoryAccepter      = rollbacks{}
	_ api.Experiments          = (*experiments.Service)(nil)
	_ api.CommandQueue         = (*github.Worker)(nil)
	_ api.WebhookReceiver      = (*webhook.Handler)(nil)
	_ api.LeaderRecords        = reconcile.StatusRecords{}
	_ experiments.Leader       = loopRef{}
	_ github.Examiner          = loopRef{}
	_ experiments.PullRequests = pullsRef{}
)
