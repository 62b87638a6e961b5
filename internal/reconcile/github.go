package reconcile

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
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// Forge is what the leader needs of GitHub (forge.Client). Every call may
// wait a little and fail with a retryable error; the GitHub worker never
// runs on the decision path or in the promoter.
type Forge interface {
	OpenPullRequests(ctx context.Context, base string) ([]forge.PullRequest, error)
	UpsertComment(ctx context.Context, pr int, body string) (int64, error)
	Comment(ctx context.Context, pr int, body string) (int64, error)
	SetStatus(ctx context.Context, sha, statusContext, state, description, targetURL string) error
	Merge(ctx context.Context, pr int, sha, method string) (string, error)
	Permission(ctx context.Context, user string) (string, error)
	GetComment(ctx context.Context, id int64) (forge.IssueComment, error)
	CreatePullRequest(ctx context.Context, head, base, title, body string) (forge.PullRequest, error)
}

var _ Forge = (*forge.Client)(nil)

// GitHubConfig turns the GitHub integration on ([github]): pull requests
// into the live branch are the experiments instead of branches, and the
// leader keeps statuses and one comment per pull request up to date.
type GitHubConfig struct {
	Forge Forge
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
var ErrCommandQueueFull = errors.New("reconcile: comment command queue is full")

// github is the leader's GitHub state. Everything GitHub-facing runs in
// one worker goroutine per leadership term (runGitHub); the reconcile pass
// only reads the list of open pull requests the worker last saw.
type github struct {
	cfg      GitHubConfig
	log      hclog.Logger
	commands chan queuedCommand
	kick     chan struct{}
	// relistAll asks the worker to list the open pull requests again.
	relistAll atomic.Bool

	// pullMu serialises the read-modify-writes of pull request records
	// (the reconcile pass's writePulls, the commands' preview state).
	pullMu sync.Mutex

	mu   sync.Mutex
	open []forge.PullRequest // nil until first listed
}

func newGitHub(cfg *GitHubConfig, log hclog.Logger) (*github, error) {
	if cfg == nil || cfg.Forge == nil {
		return nil, nil
	}
	if cfg.Summary == "" {
		cfg.Summary = "@every 1m"
	}
	if _, err := cron.ParseStandard(cfg.Summary); err != nil {
		return nil, err
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = defaultGitHubRetry
	}
	return &github{cfg: *cfg, log: log.Named("github"), commands: make(chan queuedCommand, commandQueue),
		kick: make(chan struct{}, 1)}, nil
}

// wake asks the worker for a pass; it never blocks.
func (g *github) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// openPulls returns the open pull requests last listed, and whether they
// were listed at all.
func (g *github) openPulls() ([]forge.PullRequest, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open, g.open != nil
}

// EnqueueCommand queues a comment command for the leader's GitHub worker.
// It never blocks: raftstore.ErrNotLeader where the loop is not leading
// (the caller forwards it), ErrCommandQueueFull when the queue is full,
// and an error when GitHub is not configured.
func (l *Loop) EnqueueCommand(cmd webhook.Command) error {
	if l.gh == nil {
		return errors.New("reconcile: the GitHub integration is not configured ([github])")
	}
	if !l.leading.Load() {
		return errNotLeading
	}
	select {
	case l.gh.commands <- queuedCommand{cmd: cmd, head: l.headAt(cmd.PR)}:
		l.gh.wake()
		return nil
	default:
		return ErrCommandQueueFull
	}
}

// retryDelay is how long to wait after a failed GitHub call: until GitHub
// says, else the configured delay.
func (g *github) retryDelay(err error, now time.Time) time.Duration {
	if at, ok := forge.RetryAt(err); ok && at.After(now) {
		return at.Sub(now) + 100*time.Millisecond
	}
	return g.cfg.RetryAfter
}

// errNotLeading is EnqueueCommand's answer off the leader.
var errNotLeading = fmt.Errorf("%w: this node's reconcile loop is not running", raftstore.ErrNotLeader)
