package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Store is what the loop needs of the replicated state (raftstore.Store).
type Store interface {
	State() *raftstore.State
	Subscribe() (<-chan struct{}, func())
	Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)
}

// Members tells the loop whose Ready a staged generation waits for.
type Members interface {
	// Required returns the ids of the nodes that must have reported Ready
	// before the staged generation is activated: the reachable ones.
	Required(st *raftstore.State) []string
}

// Defaults for Config fields left zero.
const (
	// DefaultCheckInterval is how often the loop re-checks readiness when
	// nothing in the replicated state changed (reachability changes with
	// heartbeats, which are not in the log).
	DefaultCheckInterval = 250 * time.Millisecond
	// retryAfter is how soon a failed reconcile is tried again.
	retryAfter = time.Second
	// maxProblems and maxProblemLen keep a MarkInvalid command far below
	// raftstore.MaxPayloadBytes.
	maxProblems   = 100
	maxProblemLen = 2000
)

// Config holds a Loop's dependencies.
type Config struct {
	Store   Store
	Members Members
	// Source is where trees come from; nil makes every reconcile a pull
	// error.
	Source TreeSource
	// Poll is the robfig/cron spec of periodic reconciles (git.poll).
	Poll string
	// LoadOptions and EngineOptions are used to validate trees; every node
	// must compile with the same ones.
	LoadOptions   policy.LoadOptions
	EngineOptions engine.Options
	// Registry receives the loop's metrics; nil registers nowhere.
	Registry prometheus.Registerer
	Logger   hclog.Logger
	// Now is the clock for metrics; times in commands come from the store.
	Now           func() time.Time
	CheckInterval time.Duration
}

// Status is the loop's last read of its source (the PullError condition).
type Status struct {
	Commit string
	Error  string
	Time   time.Time
}

// Loop is the leader-only reconcile loop: read the newest tree, skip it if
// already known, validate it, stage it as the next generation, and
// activate the staged generation once every reachable node reported Ready.
// A Loop lives as long as the node; Run runs only while the node leads, so
// a trigger received between two leaderships is kept for the next one.
type Loop struct {
	cfg     Config
	log     hclog.Logger
	trigger chan struct{}
	metrics *metrics

	mu      sync.Mutex
	status  Status
	waiting string // the last "waiting for" message logged
}

// New returns a Loop, or an error if the poll spec does not parse.
func New(cfg Config) (*Loop, error) {
	if cfg.Store == nil || cfg.Members == nil {
		return nil, errors.New("reconcile: Store and Members are required")
	}
	if _, err := cron.ParseStandard(cfg.Poll); err != nil {
		return nil, fmt.Errorf("git.poll %q: %w", cfg.Poll, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	l := &Loop{cfg: cfg, log: cfg.Logger, trigger: make(chan struct{}, 1)}
	l.metrics = newMetrics(cfg.Registry)
	return l, nil
}

// Trigger asks for a reconcile soon. Calls coalesce; it never blocks.
func (l *Loop) Trigger() {
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// Status returns the last read of the source.
func (l *Loop) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

// Run reconciles on triggers, on the poll schedule and once at start, and
// promotes the staged generation when it can, until ctx ends (leadership
// lost or node stopping). A generation staged by an earlier leader is
// resumed from the replicated state: it is activated once ready, never
// staged again.
func (l *Loop) Run(ctx context.Context) {
	sub, unsubscribe := l.cfg.Store.Subscribe()
	defer unsubscribe()
	sched := cron.New()
	if _, err := sched.AddFunc(l.cfg.Poll, l.Trigger); err != nil {
		l.log.Error("git.poll does not parse; reconciling on request only", "error", err)
	}
	sched.Start()
	defer sched.Stop()
	check := time.NewTicker(l.cfg.CheckInterval)
	defer check.Stop()
	l.Trigger()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.trigger:
			l.reconcile(ctx)
		case <-sub:
		case <-check.C:
		}
		l.promote(ctx)
	}
}

// reconcile is one pass over the source, in small steps.
func (l *Loop) reconcile(ctx context.Context) {
	tree, err := l.read(ctx)
	if err != nil {
		l.retry(ctx, "pull_error", "cannot read the policy source", err)
		return
	}
	st := l.cfg.Store.State()
	if why := known(st, tree.Commit); why != "" {
		l.metrics.result("unchanged")
		l.log.Trace("tree unchanged", "commit", tree.Commit, "known_as", why)
		return
	}
	n := st.Highest + 1
	v := l.validate(tree)
	if len(v.Problems) > 0 {
		l.markInvalid(ctx, n, tree.Commit, v.Problems)
		return
	}
	_, err = l.cfg.Store.Propose(ctx, &raftstore.StageGeneration{Generation: n, Commit: tree.Commit,
		Files: tree.Files, Etags: v.Etags})
	switch {
	case errors.Is(err, raftstore.ErrTooLarge):
		l.markInvalid(ctx, n, tree.Commit, []string{err.Error()})
	case err != nil:
		l.retry(ctx, "error", "cannot stage the generation", err)
	default:
		l.metrics.result("staged")
		l.log.Info("generation staged", "generation", n, "commit", tree.Commit, "policies", len(v.Etags))
	}
}

// read gets the newest tree and records the outcome for status.
func (l *Loop) read(ctx context.Context) (Tree, error) {
	var tree Tree
	err := errNoSource
	if l.cfg.Source != nil {
		tree, err = l.cfg.Source.Latest(ctx)
	}
	st := Status{Commit: tree.Commit, Time: l.cfg.Now()}
	if err != nil {
		st = Status{Commit: l.Status().Commit, Error: err.Error(), Time: st.Time}
	}
	l.mu.Lock()
	l.status = st
	l.mu.Unlock()
	return tree, err
}

// known says why a commit needs no new generation: it is the newest one
// recorded (whatever became of it), the staged one, or the active one
// with nothing staged. Returning to the active commit while another is
// staged does make a new generation, so the staged one never activates.
func known(st *raftstore.State, commit string) string {
	if g, ok := st.Generation(st.Highest); ok && g.Commit == commit {
		return "newest generation " + string(g.State)
	}
	if g, ok := st.StagedGeneration(); ok && g.Commit == commit {
		return "staged generation"
	}
	if g, ok := st.ActiveGeneration(); ok && g.Commit == commit && st.Staged == 0 {
		return "active generation"
	}
	return ""
}

// validate checks that a tree can become a generation: small enough for
// the log, and every policy valid.
func (l *Loop) validate(tree Tree) Validation {
	stage := raftstore.StageGeneration{Files: tree.Files}
	if size := stage.BundleSize(); size > raftstore.MaxGenerationBytes {
		return Validation{Problems: []string{fmt.Sprintf("the policies root is %d bytes (paths plus contents), over the %d byte limit of a generation: keep large files outside git.path",
			size, raftstore.MaxGenerationBytes)}}
	}
	return Validate(tree.Files, l.cfg.LoadOptions, l.cfg.EngineOptions)
}

// markInvalid records a tree that failed validation as an INVALID
// generation; the active one keeps serving.
func (l *Loop) markInvalid(ctx context.Context, n uint64, commit string, problems []string) {
	_, err := l.cfg.Store.Propose(ctx, &raftstore.MarkInvalid{Generation: n, Commit: commit,
		Errors: capProblems(problems)})
	if err != nil {
		l.retry(ctx, "error", "cannot record the invalid generation", err)
		return
	}
	l.metrics.result("invalid")
	l.log.Warn("generation invalid; the active generation keeps serving", "generation", n, "commit", commit,
		"problems", len(problems), "first", problems[0])
}

func capProblems(p []string) []string {
	out := make([]string, 0, min(len(p), maxProblems+1))
	for i, s := range p {
		if i == maxProblems {
			out = append(out, fmt.Sprintf("… and %d more problems", len(p)-maxProblems))
			break
		}
		if len(s) > maxProblemLen {
			s = s[:maxProblemLen] + "…"
		}
		out = append(out, s)
	}
	return out
}

// retry logs a failed pass and triggers another one soon.
func (l *Loop) retry(ctx context.Context, result, msg string, err error) {
	l.metrics.result(result)
	if ctx.Err() != nil || errors.Is(err, raftstore.ErrNotLeader) || errors.Is(err, raftstore.ErrLeadershipLost) {
		return // leadership is ending; the next leader starts over
	}
	l.log.Warn(msg+"; retrying", "error", err)
	time.AfterFunc(retryAfter, func() {
		if ctx.Err() == nil {
			l.Trigger()
		}
	})
}

// promote activates the staged generation once every required node has
// reported Ready. A node's ReportFailed makes the generation INVALID in
// the state machine, so it is no longer staged and never activated.
func (l *Loop) promote(ctx context.Context) {
	st := l.cfg.Store.State()
	g, ok := st.StagedGeneration()
	if !ok {
		return
	}
	var missing []string
	for _, id := range l.cfg.Members.Required(st) {
		if _, ready := g.ReadyNodes[id]; !ready {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		l.noteWaiting(g.Number, missing)
		return
	}
	_, err := l.cfg.Store.Propose(ctx, &raftstore.ActivateGeneration{Generation: g.Number})
	if err != nil {
		if !errors.Is(err, raftstore.ErrRejected) && ctx.Err() == nil {
			l.log.Warn("cannot activate the generation; retrying", "generation", g.Number, "error", err)
		}
		return
	}
	took := l.cfg.Now().Sub(g.CreateTime)
	l.metrics.promoted(took)
	l.log.Info("generation active", "generation", g.Number, "commit", g.Commit, "ready_nodes", len(g.ReadyNodes),
		"stage_to_active", took.Round(time.Millisecond))
}

// noteWaiting logs once per generation and set of missing nodes.
func (l *Loop) noteWaiting(n uint64, missing []string) {
	slices.Sort(missing)
	msg := fmt.Sprint(n, missing)
	l.mu.Lock()
	changed := msg != l.waiting
	l.waiting = msg
	l.mu.Unlock()
	if changed {
		l.log.Debug("waiting for nodes to report Ready", "generation", n, "nodes", missing)
	}
}
