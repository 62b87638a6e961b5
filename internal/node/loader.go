package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Timing of the loader's reports to the leader.
const (
	reportTimeout = 5 * time.Second
	reportRetry   = 500 * time.Millisecond
)

// loaderStore is the replicated state the loader follows.
type loaderStore interface {
	State() *raftstore.State
	Subscribe() (<-chan struct{}, func())
}

// compileFunc turns a generation's files into a bundle or its problems.
type compileFunc func(files map[string][]byte) (*engine.Bundle, []string)

// proposeFunc sends a report to the leader (cluster.Propose).
type proposeFunc func(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)

// compiled is a generation compiled on this node, or why it does not.
type compiled struct {
	bundle   *engine.Bundle
	problems []string
}

// loader is the node loader: it follows the replicated state, compiles a
// staged generation off the raft path and reports Ready (or Failed with
// the problems) to the leader, and swaps the served generation when the
// cluster activates one. The served generation never goes down, and a
// generation that does not compile here is never served: the node keeps
// the one it has. Across crashes too: raftstore makes an activation
// durable before State or Subscribe show it, so the state restored at a
// restart is never behind a generation this node served.
//
// load is called once before the node serves (the restored state, no
// leader needed); run then owns the loader.
type loader struct {
	nodeID  string
	store   loaderStore
	propose proposeFunc
	compile compileFunc
	gens    *generations
	log     hclog.Logger
	metrics *nodeMetrics
	state   *nodeState  // nil: always ACTIVE (states.go)
	stop    func(error) // stops the node when an admin sets it TERMINATED; nil ignores it
	// share is given every compiled generation's files, so that the git
	// clone keeps these rather than copies (gitsource.Source.ShareBlobs);
	// nil shares nothing.
	share func(files map[string][]byte)
	// dropLogPages drops the raft log's pages from resident memory with
	// the garbage (raftstore.Store.ReleaseLogPages); nil drops nothing.
	dropLogPages func() error

	frozenAt uint64 // the active generation a SAFE node last declined
	heldBack uint64 // the staged generation a PASSIVE node last did not report failed

	// release is set by serving a generation with large lists: the next
	// sync hands the load's garbage back to the system (releaseMemory).
	release bool
	// toShare is the files of the generation compiled last, for share.
	toShare map[string][]byte
	// offload runs tidy off the loader's goroutine (serially); nil runs it
	// in place (tests).
	offload func(func())

	cache    map[uint64]compiled          // by generation number
	pending  map[uint64]raftstore.Payload // reports not yet accepted
	reported map[uint64]bool              // reports accepted (or moot)
}

// newLoader returns a loader.
func newLoader(l loader) *loader {
	if l.offload == nil {
		l.offload = func(f func()) { f() }
	}
	l.cache = map[uint64]compiled{}
	l.pending = map[uint64]raftstore.Payload{}
	l.reported = map[uint64]bool{}
	return &l
}

// run follows the state until ctx ends, acting on the latest state after
// every change signal and retrying undelivered reports.
func (l *loader) run(ctx context.Context) {
	ch, cancel := l.store.Subscribe()
	defer cancel()
	for {
		var retry <-chan time.Time
		if !l.sync(ctx) {
			retry = time.After(reportRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-retry:
		}
	}
}

// sync acts on the latest state; false means a report is still pending.
func (l *loader) sync(ctx context.Context) bool {
	st := l.store.State()
	l.followState(st)
	l.load(st)
	l.stage(st)
	l.evict(st)
	ok := l.flush(ctx)
	if files, release := l.toShare, l.release; files != nil || release {
		// After the report and off the loader, so that neither delays a
		// generation: a forced collection takes tens of milliseconds.
		l.toShare, l.release = nil, false
		l.offload(func() { l.tidy(files, release) })
	}
	return ok
}

// tidy shares files with the git clone and, when release is set, hands the
// garbage and the raft log's pages back to the system (release.go).
func (l *loader) tidy(files map[string][]byte, release bool) {
	if files != nil && l.share != nil {
		l.share(files)
	}
	if !release {
		return
	}
	releaseMemory()
	if l.dropLogPages != nil {
		if err := l.dropLogPages(); err != nil {
			l.log.Debug("raft log pages kept resident", "error", err)
		}
	}
}

// load serves the active generation of st if it is newer than the one
// served, keeping the previous generation for pinned requests.
func (l *loader) load(st *raftstore.State) {
	cur := l.gens.Current()
	g, ok := st.ActiveGeneration()
	if !ok || (cur != nil && g.Number <= cur.Generation) || l.frozen(cur, g.Number) {
		return // nothing newer (a served generation never goes down), or SAFE
	}
	c := l.compiled(g)
	if c.bundle == nil {
		l.queue(g.Number, &raftstore.ReportFailed{Generation: g.Number, NodeID: l.nodeID, Errors: c.problems})
		return
	}
	next := &api.Snapshot{Generation: g.Number, Commit: g.Commit, Bundle: c.bundle}
	l.gens.publish(next, l.previous(st, cur, g))
	l.metrics.switched()
	// Once served, not when staged: the collection would compete for the
	// CPU with the other nodes' compiles while the cluster activates it.
	l.release = l.release || listBytes(g.Files) >= releaseListBytes
	from := uint64(0)
	if cur != nil {
		from = cur.Generation
	}
	l.log.Info("serving generation", "generation", g.Number, "commit", g.Commit, "from", from,
		"policies", len(c.bundle.Names()))
}

// previous returns the snapshot of the generation active before g: the one
// served until now, or compiled from the files the state keeps for it
// (after a restart, or when this node skipped a generation).
func (l *loader) previous(st *raftstore.State, cur *api.Snapshot, g raftstore.Generation) *api.Snapshot {
	n := st.Previous
	if cur != nil && cur.Generation == n {
		return cur
	}
	pg, ok := st.Generation(n)
	if !ok || pg.Files == nil {
		return nil
	}
	if c := l.compiled(pg); c.bundle != nil {
		return &api.Snapshot{Generation: pg.Number, Commit: pg.Commit, Bundle: c.bundle}
	}
	return nil
}

// stage compiles the staged generation and queues this node's report,
// once per generation.
func (l *loader) stage(st *raftstore.State) {
	g, ok := st.StagedGeneration()
	if !ok || l.reported[g.Number] || l.pending[g.Number] != nil {
		return
	}
	if _, done := g.ReadyNodes[l.nodeID]; done {
		l.reported[g.Number] = true // reported before a restart
		return
	}
	c := l.compiled(g)
	if c.bundle == nil && l.passive() {
		l.passiveFailed(g.Number, c.problems) // reported if the node becomes ACTIVE while it is staged
		return
	}
	if c.bundle == nil {
		l.log.Error("staged generation does not compile on this node; reporting it failed",
			"generation", g.Number, "commit", g.Commit, "problems", len(c.problems), "first", c.problems[0])
		l.queue(g.Number, &raftstore.ReportFailed{Generation: g.Number, NodeID: l.nodeID, Errors: c.problems})
		return
	}
	l.queue(g.Number, &raftstore.ReportReady{Generation: g.Number, NodeID: l.nodeID})
}

func (l *loader) queue(n uint64, p raftstore.Payload) {
	if !l.reported[n] && l.pending[n] == nil {
		l.pending[n] = p
	}
}

// flush sends the pending reports, oldest first; false when one must be
// retried (no leader reachable).
func (l *loader) flush(ctx context.Context) bool {
	ok := true
	for _, n := range slices.Sorted(maps.Keys(l.pending)) {
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		_, err := l.propose(rctx, l.pending[n])
		cancel()
		switch {
		case err == nil || errors.Is(err, raftstore.ErrRejected):
			// Rejected: the generation is gone from the state, the report
			// is moot (the FSM takes Ready for any known generation).
			delete(l.pending, n)
			l.reported[n] = true
		case ctx.Err() != nil:
			return false
		default:
			l.log.Debug("report not delivered; retrying", "generation", n, "error", err)
			ok = false
		}
	}
	return ok
}

// compiled returns generation g compiled, from the cache or now (this
// node's group's policies: groups.go). A bundle whose etags differ from
// the leader's is refused: the node would serve something else than the
// cluster validated (a different build or a different [policy]
// merge_default).
func (l *loader) compiled(g raftstore.Generation) compiled {
	if c, ok := l.cache[g.Number]; ok {
		return c
	}
	start := time.Now()
	b, problems := l.compile(g.Files)
	if b != nil {
		problems = etagMismatch(b.Etags(), servedEtags(g.Etags, b))
		if problems != nil {
			b = nil
		}
	}
	if b == nil && len(problems) == 0 {
		problems = []string{"the generation does not compile"}
	}
	c := compiled{bundle: b, problems: problems}
	l.cache[g.Number] = c
	if b != nil {
		l.toShare = g.Files
	}
	l.metrics.compiled(b != nil)
	l.log.Info("compiled generation", "generation", g.Number, "ok", b != nil, "took", time.Since(start))
	return c
}

func etagMismatch(got, want map[string]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got[name] != want[name] {
			out = append(out, fmt.Sprintf("%s: etag %q on this node, %q on the leader: every node must run the same build with the same [policy] merge_default",
				name, got[name], want[name]))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			out = append(out, fmt.Sprintf("%s: compiled on this node but not on the leader", name))
		}
	}
	return out
}

// evict drops compiled bundles the state no longer refers to.
func (l *loader) evict(st *raftstore.State) {
	for n := range l.cache {
		if n != st.Active && n != st.Previous && n != st.Staged {
			delete(l.cache, n)
		}
	}
	for n := range l.reported {
		if n+raftstore.HistoryLimit < st.Highest {
			delete(l.reported, n)
		}
	}
}
