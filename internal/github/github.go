// Package github is the leader's GitHub worker ([github]): it lists the
// open pull requests into the live branch and records them for the
// reconcile pass (their experiments are kept by internal/experiments),
// keeps the reconciler/promote, reconciler/validate and reconciler/preview
// statuses and one preview comment per pull request up to date, and runs
// the comment commands (/reconciler preview|status|commit|help) that the
// webhook (internal/webhook) queues. Everything GitHub-facing runs in one
// goroutine per leadership term, so a slow or rate-limited GitHub never
// delays a reconcile pass, a promotion or a decision.
package github

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/robfig/cron/v3"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// Store is what the worker needs of the replicated state
// (raftstore.Store).
type Store interface {
	State() *raftstore.State
	Subscribe() (<-chan struct{}, func())
	Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)
}

// Examiner compares a pull request's head with the live branch and
// validates its tree, as the reconcile loop does for branches
// (reconcile.Trees.Examine).
type Examiner interface {
	Examine(head, main gitsource.Revision) (reconcile.Examination, error)
	// Diverged is the live-branch head the loop refuses to promote, nil
	// when there is none.
	Diverged() *reconcile.Divergence
}

// Experiments is what the worker needs of the experiment service
// (internal/experiments): the experiments of a pull request for its
// summaries, and the preview methods the comment commands run.
type Experiments interface {
	List() []*preview.Experiment
	StartPreview(ctx context.Context, name string) (*preview.Operation, error)
	StopPreview(ctx context.Context, name string) (*preview.Operation, error)
	// StartPreviewAt starts an experiment only while its source is at
	// head (ABORTED otherwise): a writer's approval of one head of a
	// non-writer's pull request.
	StartPreviewAt(ctx context.Context, name, head string) (*preview.Operation, error)
}

// Forge is what the leader needs of GitHub (forge.Client). Every call may
// wait a little and fail with a retryable error; the GitHub worker never
// runs on the decision path or in the promoter.
type Forge interface {
	OpenPullRequests(ctx context.Context, base string) ([]forge.PullRequest, error)
	UpsertComment(ctx context.Context, pr int, body string) (forge.PostedComment, error)
	// ShowComment is UpsertComment asking GitHub, not a cache, what the
	// comment shows: its UpdatedAt dates a new head (recordShown).
	ShowComment(ctx context.Context, pr int, body string) (forge.PostedComment, error)
	Comment(ctx context.Context, pr int, body string) (int64, error)
	SetStatus(ctx context.Context, sha, statusContext, state, description, targetURL string) error
	Merge(ctx context.Context, pr int, sha, method string) (string, error)
	Permission(ctx context.Context, user string) (string, error)
	CreatePullRequest(ctx context.Context, head, base, title, body string) (forge.PullRequest, error)
	GetComment(ctx context.Context, id int64) (forge.IssueComment, error)
}

var _ Forge = (*forge.Client)(nil)

// Config turns the GitHub integration on ([github]): pull requests into
// the live branch are the experiments instead of branches, and the leader
// keeps statuses and one comment per pull request up to date.
type Config struct {
	Forge       Forge
	Store       Store
	Examiner    Examiner
	Experiments Experiments
	// Trigger asks the reconcile loop for a pass (reconcile.Loop.Trigger).
	Trigger func()
	// Branch is the live branch ("main" when empty).
	Branch string
	Logger hclog.Logger
	Now    func() time.Time
	// Summary is the robfig/cron spec of comment refreshes
	// (preview.summary); a material change is posted at once.
	Summary string
	// RetryAfter is how soon a failed GitHub call is tried again when
	// GitHub does not say (default 5s).
	RetryAfter time.Duration
	// Stats returns the cluster's merged preview stats (the leader's
	// preview runtime); nil shows none. Thresholds judge them, by policy
	// ([preview.thresholds]), for the summaries and the reconciler/preview
	// status.
	Stats      func() []preview.Stats
	Thresholds preview.ThresholdSet
	// Redactor is the samples' redaction ([preview] redact and show): a
	// held pull request's comment names the hidden values its changed
	// rules read. nil means the defaults.
	Redactor *preview.Redactor
}

// Defaults of the GitHub worker.
const (
	defaultGitHubRetry = 5 * time.Second
	// commandQueue bounds the comment commands waiting on the leader.
	commandQueue = 64
)

// queuedCommand is a comment command waiting for the GitHub worker;
// retry marks one queued again after a retryable failure, already claimed.
type queuedCommand struct {
	cmd   webhook.Command
	retry bool
	// head is the pull request's head commit recorded when the leader
	// received the command: what /reconciler commit may merge (headAt).
	head string
}

// ErrCommandQueueFull means the leader has too many comment commands
// waiting; the command is dropped (the user may comment again).
var ErrCommandQueueFull = errors.New("github: comment command queue is full")

// Worker is the leader's GitHub worker. Everything GitHub-facing runs in
// one goroutine per leadership term (Start, run); the reconcile pass
// reads the list of open pull requests the worker last saw (SyncPulls).
type Worker struct {
	cfg      Config
	log      hclog.Logger
	run      lifecycle.Runner
	commands chan queuedCommand
	kick     chan struct{}
	// relistAll asks the worker to list the open pull requests again.
	relistAll atomic.Bool

	// pullMu serialises the read-modify-writes of pull request records
	// (the reconcile pass's writePulls, the commands' preview state).
	pullMu sync.Mutex

	mu   sync.Mutex
	open []forge.PullRequest // nil until first listed
	// pulls caches each open pull request's record by number, for one
	// term (reset by Start); only the reconcile pass touches it.
	pulls map[int]pullEntry
}

// New returns a Worker, or an error when the summary schedule does not
// parse.
func New(cfg Config) (*Worker, error) {
	if cfg.Forge == nil || cfg.Store == nil || cfg.Examiner == nil || cfg.Experiments == nil {
		return nil, errors.New("github: Forge, Store, Examiner and Experiments are required")
	}
	if cfg.Summary == "" {
		cfg.Summary = "@every 1m"
	}
	if _, err := cron.ParseStandard(cfg.Summary); err != nil {
		return nil, fmt.Errorf("preview.summary %q: %w", cfg.Summary, err)
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = defaultGitHubRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Trigger == nil {
		cfg.Trigger = func() {}
	}
	if cfg.Branch == "" {
		cfg.Branch = gitsource.DefaultBranch
	}
	if cfg.Redactor == nil {
		cfg.Redactor = preview.NewRedactor(preview.DefaultRedact, nil)
	}
	return &Worker{cfg: cfg, log: cfg.Logger.Named(logging.GitHub), commands: make(chan queuedCommand, commandQueue),
		kick: make(chan struct{}, 1), pulls: map[int]pullEntry{}}, nil
}

// Start runs the worker for one leadership term, until ctx ends or Stop.
func (g *Worker) Start(ctx context.Context) error {
	g.mu.Lock()
	g.pulls = map[int]pullEntry{}
	g.mu.Unlock()
	g.run.Go(ctx, g.runTerm)
	return nil
}

// Stop ends the term's work and waits for it, at most until ctx ends.
func (g *Worker) Stop(ctx context.Context) { g.run.Halt(ctx) }

// Status reports the worker for /v1/status: STOPPED off the leader, WARN
// while GitHub calls fail (they are retried), else OK.
func (g *Worker) Status() lifecycle.Status { return g.run.Status() }

// wake asks the worker for a pass; it never blocks.
func (g *Worker) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// openPulls returns the open pull requests last listed, and whether they
// were listed at all.
func (g *Worker) openPulls() ([]forge.PullRequest, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open, g.open != nil
}

// EnqueueCommand queues a comment command for the leader's GitHub worker.
// It never blocks: raftstore.ErrNotLeader where the worker is not running
// (the caller forwards it to the leader), ErrCommandQueueFull when the
// queue is full.
func (g *Worker) EnqueueCommand(cmd webhook.Command) error {
	if !g.run.Running() {
		return errNotLeading
	}
	select {
	case g.commands <- queuedCommand{cmd: cmd, head: g.headAt(cmd.PR)}:
		g.wake()
		return nil
	default:
		return ErrCommandQueueFull
	}
}

// retryDelay is how long to wait after a failed GitHub call: until GitHub
// says, else the configured delay.
func (g *Worker) retryDelay(err error, now time.Time) time.Duration {
	if at, ok := forge.RetryAt(err); ok && at.After(now) {
		return at.Sub(now) + 100*time.Millisecond
	}
	return g.cfg.RetryAfter
}

// errNotLeading is EnqueueCommand's answer off the leader.
var errNotLeading = fmt.Errorf("%w: this node's reconcile loop is not running", raftstore.ErrNotLeader)
