package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Store is what the loop needs of the replicated state (raftstore.Store).
type Store interface {
	State() *raftstore.State
	Subscribe() (<-chan struct{}, func())
	Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)
}

// Members tells the loop whose Ready a staged generation waits for
// (cluster.Cluster).
type Members interface {
	// Required returns the ids of the nodes that must have reported Ready
	// before the staged generation is activated: the reachable serving
	// ones, less those left behind (nodes that cannot load it).
	Required(st *raftstore.State) []string
	// Unloadable returns, when the nodes that cannot load the staged
	// generation leave no majority of the serving nodes able to, why:
	// the errors of the MarkInvalid that ends it. Nil otherwise.
	Unloadable(st *raftstore.State) []string
}

// Experiments is what a pass needs of the experiment service
// (internal/experiments): the experiments follow the branches or pull
// requests the pass just computed, a deleted live policy takes its
// experiments with it, and old operations are pruned.
type Experiments interface {
	// Epoch counts the commits the service pushed; a pass that fetched
	// before one must not sync branch experiments (its refs are stale).
	Epoch() uint64
	// SyncBranches makes the branch experiments match changes, unless a
	// commit happened since epoch; live is the tree main stands for.
	SyncBranches(ctx context.Context, changes []experiments.Change, live map[string][]byte, epoch uint64) error
	// SyncPulls makes the pull request experiments match changes.
	SyncPulls(ctx context.Context, changes []experiments.Change, live map[string][]byte) error
	// Cascade deletes the experiments of policies live in from, not in to.
	Cascade(ctx context.Context, from, to raftstore.Generation)
	// PruneOperations bounds the stored operations; last is when this
	// term last scanned, updated by the call.
	PruneOperations(ctx context.Context, last *time.Time)
	// ResumeCommits completes the commit operations an earlier leader
	// left running once their generation has an outcome; seen is what it
	// last scanned at (nil at a new term).
	ResumeCommits(ctx context.Context, seen *experiments.GenerationsKey) *experiments.GenerationsKey
	// AutoStop suspends the ACTIVE experiments whose autoStop is due.
	AutoStop(ctx context.Context)
}

// Pulls is the pull request side of the GitHub worker
// (internal/github): with [github], the open pull requests into the live
// branch are the experiments' sources instead of the other branches.
type Pulls interface {
	// SyncPulls records the open pull requests whose heads refs holds,
	// compared with refs.Main (live holds the etags main stands for), and
	// returns what each changes: nil (not empty) while the open pull
	// requests are not known yet (a new leader's worker has not listed
	// them), when the pull request experiments are left as they are.
	SyncPulls(ctx context.Context, refs *gitsource.Refs, live map[string]string) ([]experiments.Change, error)
	// OpenKey identifies the open pull requests last listed, for the
	// skip-unchanged step.
	OpenKey() string
	// Refresh asks for the open pull requests to be listed again.
	Refresh()
}

// PullRequestOpener opens a pull request (forge.Client), for a rollback
// whose push to the live branch is refused.
type PullRequestOpener interface {
	CreatePullRequest(ctx context.Context, head, base, title, body string) (forge.PullRequest, error)
}

// Defaults for Config fields left zero.
const (
	// DefaultCheckInterval is how often the loop re-checks readiness when
	// nothing in the replicated state changed (reachability changes with
	// heartbeats, which are not in the log).
	DefaultCheckInterval = 250 * time.Millisecond
	// DefaultMaxCommits bounds how many new commits of the live branch one
	// pass turns into generations; past it, only the newest is taken.
	DefaultMaxCommits = 32
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
	// Source is the policy repository; nil makes every pass a pull error.
	Source Source
	// Verify, when set ([git] verify = "signed"), checks a live-branch
	// commit's signature before it may become a generation: an error
	// makes the commit INVALID (gitsource.Source.VerifyCommit).
	Verify func(commit string) (signer string, err error)
	// Branch is the live branch, for revisions in logs ("main" when empty).
	Branch string
	// URL is the remote, already redacted, for the PullError record.
	URL string
	// Poll is the robfig/cron spec of periodic reconciles (git.poll).
	Poll string
	// LoadOptions and EngineOptions are used to validate trees; every node
	// must compile with the same ones.
	LoadOptions   policy.LoadOptions
	EngineOptions engine.Options
	// Validator validates every tree the loop judges (main's commits,
	// branches and pull requests, experiments' trees); nil is Validate in
	// this process. A node uses sandbox.Runner, a child process with a
	// memory limit and a deadline.
	Validator Validator
	// Registry receives the loop's metrics; nil registers nowhere.
	Registry prometheus.Registerer
	Logger   hclog.Logger
	// Now is the clock for metrics and records; times in generation
	// commands come from the store.
	Now           func() time.Time
	CheckInterval time.Duration
	MaxCommits    int
	// Experiments is the experiment service; nil keeps no experiments.
	Experiments Experiments
	// Pulls, when set ([github]), makes the open pull requests the
	// experiments' sources instead of the other branches.
	Pulls Pulls
	// PullRequests, when set ([github]), opens a refused rollback as a
	// pull request.
	PullRequests PullRequestOpener
	// Beside run beside the passes for each leadership term, stopped
	// with it: the GitHub worker.
	Beside []lifecycle.Part
}

// SourceStatus is the loop's last read of its source, in the leader's
// memory (the cluster view carries it to followers; the replicated
// SourceRecord keeps a PullError across leader changes).
type SourceStatus struct {
	// Commit is the live branch's head at the last successful fetch.
	Commit string
	Error  string
	Time   time.Time
	// Diverged is set while the live branch's head does not descend from
	// the active generation's commit (diverged.go).
	Diverged *Divergence
}

// Loop is the leader-only reconcile loop: fetch the repository, skip when
// nothing moved, turn each new commit of the live branch into a generation
// (validate, then Stage or MarkInvalid), record the other branches, and
// activate the staged generation once every reachable node reported Ready.
// A Loop lives as long as the node; Run runs only while the node leads, so
// a trigger received between two leaderships is kept for the next one.
type Loop struct {
	cfg     Config
	log     hclog.Logger
	trigger chan struct{}
	metrics *metrics
	leading atomic.Bool
	steps   []passStep
	// housekeepQuiet is housekeepQuiet; the tests shorten it.
	housekeepQuiet time.Duration
	// housekeeping is set while a run of the clone's housekeeping goes
	// on beside the passes (housekeeping.go).
	housekeeping atomic.Bool
	// run is the current term (Start/Stop).
	run lifecycle.Runner

	mu      sync.Mutex
	status  SourceStatus
	waiting string // the last "waiting for" message logged
	// diverged and accepted are the refused live head and the one an
	// operator accepted (diverged.go); forcePass makes the next pass run
	// although no ref moved.
	diverged  *Divergence
	accepted  string
	forcePass atomic.Bool

	// passes counts finished reconcile passes, so tests can wait for one
	// instead of sleeping.
	passes atomic.Uint64

	// The parts that own what is not the term, the pass or promotion:
	// reading and judging trees (merged.go), recording branches
	// (branches.go), the experiments' commit path (commitpath.go) and
	// rollback (rollback.go).
	trees     *Trees
	branches  *branchRecorder
	committer *Committer
	rollbacks *Rollbacks
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
	if cfg.MaxCommits <= 0 {
		cfg.MaxCommits = DefaultMaxCommits
	}
	if cfg.Branch == "" {
		cfg.Branch = gitsource.DefaultBranch
	}
	l := &Loop{cfg: cfg, log: cfg.Logger, trigger: make(chan struct{}, 1)}
	l.metrics = newMetrics(cfg.Registry)
	// The parts share the loop's Config, so what a test sets on it after
	// New reaches them too.
	l.trees = &Trees{cfg: &l.cfg, trees: map[string]map[string][]byte{}, conflicts: map[string]string{}}
	l.branches = &branchRecorder{cfg: &l.cfg, log: l.log, trees: l.trees}
	l.committer = &Committer{cfg: &l.cfg, trees: l.trees}
	l.rollbacks = &Rollbacks{cfg: &l.cfg, log: l.log, loop: l}
	l.steps = l.passSteps()
	l.housekeepQuiet = housekeepQuiet
	return l, nil
}

// Trees reads, merges and judges the trees of the experiments' sources
// (experiments.Leader, github.Examiner).
func (l *Loop) Trees() *Trees { return l.trees }

// Committer writes experiments to the live branch (experiments.Leader).
func (l *Loop) Committer() *Committer { return l.committer }

// Rollbacks writes reverts and waits for the generations of commits
// (api.Rollbacker, experiments.Leader).
func (l *Loop) Rollbacks() *Rollbacks { return l.rollbacks }

// Trigger asks for a reconcile soon (the poll schedule, POST
// /v1/cluster:reconcile and the webhook all call it). Calls coalesce; it
// never blocks.
func (l *Loop) Trigger() {
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// SourceStatus returns the last read of the source.
func (l *Loop) SourceStatus() SourceStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.status
	s.Diverged = l.diverged
	return s
}

// term is what one leadership term remembers between passes. A new term
// starts from the replicated state only, so a leader never acts on what
// it remembered from an earlier term while another node led.
type term struct {
	// refs are the refs of the last complete pass.
	refs *gitsource.Refs
	// cursor is the last live commit handled in this term.
	cursor string
	// branches caches each branch's record by branch name.
	branches map[string]branchEntry
	// open is the open pull request list (Pulls.OpenKey) of the last
	// complete pass.
	open string
	// pruned is when pruneOperations last scanned.
	pruned time.Time
	// housekeep is set by a pass that was not idle, at changed, for an
	// idle one (housekeeping.go).
	housekeep bool
	changed   time.Time
	// background is Run's: the term ends after what it started beside
	// the passes (housekeeping).
	background *sync.WaitGroup
}

// Leading reports whether a leadership term runs here (Run), for the
// parts that act only on the leader.
func (l *Loop) Leading() bool { return l.leading.Load() }

// Start runs one leadership term (Run) in the background until ctx ends
// or Stop; the node calls it when this node becomes the leader.
func (l *Loop) Start(ctx context.Context) error {
	l.run.Go(ctx, l.Run)
	return nil
}

// Stop ends the term and waits for it, at most until ctx ends.
func (l *Loop) Stop(ctx context.Context) { l.run.Halt(ctx) }

// Status reports the loop for /v1/status: STOPPED off the leader, ERROR
// while the source cannot be fetched, else OK with the live revision.
func (l *Loop) Status() lifecycle.Status {
	if !l.run.Running() {
		return lifecycle.Status{State: lifecycle.Stopped, Message: "not the leader"}
	}
	s := l.SourceStatus()
	switch {
	case s.Error != "":
		return lifecycle.Status{State: lifecycle.Error, Message: s.Error}
	case s.Commit == "":
		return lifecycle.Status{State: lifecycle.NotReady, Message: "no fetch yet"}
	}
	return lifecycle.Status{State: lifecycle.OK, Message: "following " + l.revision(s.Commit)}
}

// Run reconciles on triggers, on the poll schedule and once at start, and
// promotes the staged generation when it can, until ctx ends (leadership
// lost or node stopping). Promotion runs beside the reconcile passes, so a
// slow remote never delays the activation of a staged generation; so do
// the Beside parts (the GitHub worker). A generation staged by an earlier
// leader is resumed from the replicated state: it is activated once ready,
// never staged again.
func (l *Loop) Run(ctx context.Context) {
	l.leading.Store(true)
	defer l.leading.Store(false)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.runPromoter(ctx)
	}()
	for _, p := range l.cfg.Beside {
		if err := p.Start(ctx); err != nil {
			l.log.Error("cannot start a part of the leader", "error", err)
			continue
		}
		defer p.Stop(context.WithoutCancel(ctx))
	}
	sched := cron.New()
	if _, err := sched.AddFunc(l.cfg.Poll, l.Trigger); err != nil {
		l.log.Error("git.poll does not parse; reconciling on request only", "error", err)
	}
	sched.Start()
	defer sched.Stop()
	t := &term{branches: map[string]branchEntry{}, background: &wg}
	l.Trigger()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.trigger:
			l.reconcile(ctx, t)
		}
	}
}

// runPromoter activates the staged generation when it can, on every state
// change and every CheckInterval.
func (l *Loop) runPromoter(ctx context.Context) {
	sub, unsubscribe := l.cfg.Store.Subscribe()
	defer unsubscribe()
	check := time.NewTicker(l.cfg.CheckInterval)
	defer check.Stop()
	var seen *experiments.GenerationsKey // nil: a new term checks the left commit operations once
	for {
		l.promote(ctx)
		if l.cfg.Experiments != nil {
			seen = l.cfg.Experiments.ResumeCommits(ctx, seen)
			l.cfg.Experiments.AutoStop(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-sub:
		case <-check.C:
		}
	}
}

// sameRefs reports whether two fetches saw the same branches and pulls.
func sameRefs(a, b *gitsource.Refs) bool {
	if a.Main != b.Main || len(a.Branches) != len(b.Branches) || len(a.Pulls) != len(b.Pulls) {
		return false
	}
	for name, r := range a.Branches {
		if b.Branches[name] != r {
			return false
		}
	}
	for n, r := range a.Pulls {
		if b.Pulls[n] != r {
			return false
		}
	}
	return true
}

// revision formats a live-branch commit as flux does: "main@sha1:<hash>".
func (l *Loop) revision(commit string) string {
	if commit == "" || IsDirCommit(commit) {
		return commit
	}
	return gitsource.Revision{Ref: l.cfg.Branch, Hash: commit}.String()
}

// retry logs a failed pass (unless msg is empty: already logged) and
// triggers another one soon.
func (l *Loop) retry(ctx context.Context, result, msg string, err error) {
	l.metrics.result(result)
	if ctx.Err() != nil || errors.Is(err, raftstore.ErrNotLeader) || errors.Is(err, raftstore.ErrLeadershipLost) {
		return // leadership is ending; the next leader starts over
	}
	if msg != "" {
		l.log.Warn(msg+"; retrying", "error", err)
	} else {
		l.log.Debug("still failing; retrying", "error", err)
	}
	time.AfterFunc(retryAfter, func() {
		if ctx.Err() == nil {
			l.Trigger()
		}
	})
}

// promote activates the staged generation once every required node has
// reported Ready. A node that reports it failed is left behind (not
// required); when too many do for a majority of the serving nodes to load
// it, the generation is marked INVALID instead: besides the leader's own
// validation, the only way a staged generation becomes INVALID.
func (l *Loop) promote(ctx context.Context) {
	st := l.cfg.Store.State()
	g, ok := st.StagedGeneration()
	if !ok {
		return
	}
	if problems := l.cfg.Members.Unloadable(st); problems != nil {
		err := l.markInvalid(ctx, g.Number, g.Commit, problems)
		if err != nil && !errors.Is(err, raftstore.ErrRejected) && ctx.Err() == nil {
			l.log.Warn("cannot mark the generation invalid; retrying", "generation", g.Number, "error", err)
		}
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
	if old, ok := st.ActiveGeneration(); ok && l.cfg.Experiments != nil {
		l.cfg.Experiments.Cascade(ctx, old, g)
	}
	took := l.cfg.Now().Sub(g.CreateTime)
	l.metrics.promoted(took)
	l.log.Info("generation active", "generation", g.Number, "revision", l.revision(g.Commit),
		"ready_nodes", len(g.ReadyNodes), "stage_to_active", took.Round(time.Millisecond))
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
