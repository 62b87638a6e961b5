package node

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Timing of the preview runtime.
const (
	// previewPoll is how often the runtime re-checks the served generation
	// (the loader publishes it on its own goroutine) and the state.
	previewPoll = 200 * time.Millisecond
)

// previewRuntime is one node's preview (internal/preview): a Shadow fed
// after each live decision and by :mirror, the experiments of the
// replicated state compiled off the raft path, the preview log in
// {data_dir}/preview.log, and the stats: they ride on the cluster
// heartbeats (cluster.Piggyback): every node sends its NodeStats, the leader
// merges them and answers with the merge, so every node can show the
// cluster's stats of an experiment.
type previewRuntime struct {
	nodeID   string
	group    string // the node's group: it previews only what it serves (groups.go)
	ruleCap  int    // rules in preview evaluated per policy (preview.max_experiments_per_policy)
	store    *raftstore.Store
	gens     *generations
	shadow   *preview.Shadow
	compiler *preview.Compiler
	logFile  *preview.RotatingFile
	log      hclog.Logger

	lastSnap  *api.Snapshot
	lastExps  uint64
	live      map[string]*engine.CompiledPolicy
	seed      maphash.Seed
	compileMu sync.Mutex
	// abort stops a compile under way when the node stops
	// (engine.Options.Abort): shutting down never waits for it.
	abort *atomic.Bool

	merged      atomic.Pointer[[]preview.Stats] // the last merge adopted from a heartbeat
	trimmedOnce atomic.Bool                     // warned that the stats were trimmed
}

var _ api.Preview = (*previewRuntime)(nil)
var _ api.Mirror = (*previewRuntime)(nil)
var _ cluster.Piggyback = (*previewRuntime)(nil)

// newPreviewRuntime builds the runtime from [preview]; the shadow starts
// with start.
func (m *Main) newPreviewRuntime(eopts engine.Options) (*previewRuntime, error) {
	cfg := m.Config.Preview
	log := m.Logger.Named(logging.Preview)
	f, err := preview.OpenRotating(m.Config.Node.DataDir+"/preview.log", cfg.LogMaxBytes, 5)
	if err != nil {
		return nil, fmt.Errorf("open the preview log: %w", err)
	}
	redact := previewRedact(cfg)
	unchanged := cfg.LogUnchangedEvery
	if unchanged == 0 {
		unchanged = -1 // 0 in the file means "never"
	}
	sh := preview.New(preview.Config{
		Node: m.Config.Node.ID, Workers: cfg.Workers, QueueSize: cfg.QueueSize, Redact: redact, Show: cfg.Show,
		Log: f, UnchangedEvery: unchanged, RecordRequests: recordRequests(cfg.RecordRequests), Logger: log,
	})
	registerPreviewLogMetrics(m.registry, sh)
	registerPreviewQueueMetrics(m.registry, sh)
	m.registry.MustRegister(newPreviewCollector(sh))
	eopts.FindList = &engine.ListFinder{Find: storeLists(m.store)}
	eopts.Abort = new(atomic.Bool)
	comp := preview.NewCompiler(eopts).WithBudget(cfg.MaxCompiledBytes)
	registerCompilerMetrics(m.registry, comp)
	return &previewRuntime{
		nodeID: m.Config.Node.ID, group: m.Config.Node.Group, ruleCap: cfg.MaxExperimentsPerPolicy, store: m.store, gens: &m.gens, shadow: sh, logFile: f,
		compiler: comp, log: log, seed: maphash.MakeSeed(), abort: eopts.Abort,
	}, nil
}

// registerCompilerMetrics exports what the node's compiled experiments
// hold against preview.max_compiled_bytes: a held fork's experiment is
// not among them until a writer approves it.
func registerCompilerMetrics(reg prometheus.Registerer, comp *preview.Compiler) {
	gauge := func(name, help string, f func(preview.Usage) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "reconciler", Name: name, Help: help},
			func() float64 { return f(comp.Usage()) })
	}
	reg.MustRegister(
		gauge("preview_compiled_experiments", "Experiment programs this node holds compiled for shadow evaluation.",
			func(u preview.Usage) float64 { return float64(u.Programs) }),
		gauge("preview_compiled_bytes", "Estimated bytes of those programs (engine.Size.Bytes).",
			func(u preview.Usage) float64 { return float64(u.Bytes) }),
		gauge("preview_compiled_budget_bytes", "preview.max_compiled_bytes: the budget of those programs.",
			func(u preview.Usage) float64 { return float64(u.Budget) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "reconciler", Name: "preview_compiles_total",
			Help: "Experiment programs compiled by this node (cache misses)."},
			func() float64 { return float64(comp.Usage().Compiles) }),
	)
}

// previewRedact is [preview] redact, or the defaults when absent.
func previewRedact(cfg config.Preview) []string {
	if cfg.Redact == nil {
		return preview.DefaultRedact
	}
	return cfg.Redact
}

// registerPreviewLogMetrics exports the preview log's losses: lines that
// failed to be written, and lines dropped below the free-space watermark.
func registerPreviewLogMetrics(reg prometheus.Registerer, sh *preview.Shadow) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "preview_log_write_errors_total",
			Help: "Preview log lines that could not be written (I/O errors).",
		}, func() float64 { return float64(sh.Status().LogErrors) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "preview_log_dropped_total",
			Help: "Preview log lines dropped because data_dir's file system was below the free-space watermark.",
		}, func() float64 { return float64(sh.Status().LogDropped) }),
	)
}

// recordRequests maps the config (0 = off) to preview.Config (negative = off).
func recordRequests(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// run keeps the shadow in step with the served generation and the
// experiments until ctx ends, then stops the shadow and closes the log.
func (p *previewRuntime) run(ctx context.Context) {
	if err := p.shadow.Start(ctx); err != nil {
		return
	}
	p.abort.Store(false)
	defer context.AfterFunc(ctx, func() { p.abort.Store(true) })()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = p.shadow.Stop(sctx)
		cancel()
		_ = p.logFile.Close()
	}()
	sub, unsubscribe := p.store.Subscribe()
	defer unsubscribe()
	tick := time.NewTicker(previewPoll)
	defer tick.Stop()
	for {
		p.sync()
		select {
		case <-ctx.Done():
			return
		case <-sub:
		case <-tick.C:
		}
	}
}

// sync installs a newly served generation (SetLive) and a changed set of
// experiments (compiled here, off the raft path; SetExperiments).
func (p *previewRuntime) sync() {
	snap := p.gens.Current()
	genChanged := snap != p.lastSnap
	if genChanged {
		p.lastSnap = snap
		p.live = map[string]*engine.CompiledPolicy{}
		var n uint64
		if snap != nil && snap.Bundle != nil {
			n = snap.Generation
			for _, name := range snap.Bundle.Names() {
				if cp, ok := snap.Bundle.Policy(name); ok {
					p.live[name] = cp
				}
			}
		}
		p.shadow.SetLive(n, p.live)
	}
	st := p.store.State()
	fp := p.fingerprint(st)
	if fp == p.lastExps && !genChanged {
		return
	}
	p.lastExps = fp
	exps, errs := preview.FromState(st)
	for _, err := range errs {
		p.log.Warn("skipping an experiment that does not decode", "error", err)
	}
	exps = servedExperiments(exps, p.live, snap, p.group)
	// The live policies' rules in preview are experiments made here, from
	// the served generation: every node makes the same ones.
	exps = append(exps, preview.PreviewRules(p.live, p.ruleCap)...)
	p.compileMu.Lock()
	before := p.compiler.Usage().Measured
	compiled, cerrs := p.compiler.CompileAll(exps, p.live)
	if p.compiler.Usage().Measured != before {
		// Compiling allocates about 4 KiB an expression node and keeps a
		// tenth of it (measuring one refused, a parse, keeps nothing):
		// hand the rest back to the system now, so that the node's
		// resident memory is what it holds, not the peak of the last
		// compile.
		debug.FreeOSMemory()
	}
	p.compileMu.Unlock()
	if p.abort.Load() {
		return // stopping: nothing half compiled is installed
	}
	for name, err := range cerrs {
		p.log.Warn("experiment not previewed on this node", "experiment", name, "error", err)
	}
	p.shadow.SetExperiments(p.live, compiled)
	active := 0
	for _, ce := range compiled {
		if ce.Program != nil {
			active++
		}
	}
	u := p.compiler.Usage()
	p.log.Debug("experiments installed", "experiments", len(compiled), "evaluated", active,
		"compiled_bytes", u.Bytes, "budget_bytes", u.Budget)
}

// fingerprint hashes the experiment documents of st.
func (p *previewRuntime) fingerprint(st *raftstore.State) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	for _, name := range slices.Sorted(maps.Keys(st.Experiments)) {
		h.WriteString(name)
		h.WriteByte(0)
		h.Write(st.Experiments[name].Data)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// Offer implements api.Preview: called after a live decision was written.
func (p *previewRuntime) Offer(policyName string, d engine.Decision, req *engine.Request) {
	p.shadow.Offer(policyName, d, req)
}

// OfferDecoded is Offer for a request decoded from a JSON body of body
// bytes, which the recorder may keep without a copy.
func (p *previewRuntime) OfferDecoded(policyName string, d engine.Decision, req *engine.Request, body int) {
	p.shadow.OfferDecoded(policyName, d, req, body)
}

// Mirror implements api.Mirror.
func (p *previewRuntime) Mirror(_ *api.Snapshot, policyName string, req *engine.Request) {
	p.shadow.Mirror(policyName, req)
}

// Previewing implements api.Preview.
func (p *previewRuntime) Previewing(policyName string) bool { return p.shadow.Previewing(policyName) }

// Status implements api.Preview.
func (p *previewRuntime) Status() preview.Status { return p.shadow.Status() }

// Stats implements api.Preview: the cluster's merged stats as the last
// heartbeat brought them (at most one heartbeat interval old), or this
// node's own before the first.
func (p *previewRuntime) Stats() []preview.Stats {
	if m := p.merged.Load(); m != nil {
		return *m
	}
	return preview.Merge(p.shadow.NodeStats())
}

// Outgoing implements cluster.Piggyback: this node's stats.
// They are bounded (preview.MaxPayloadBytes): a heartbeat over the API's
// body limit would be refused whole, and the leader would count this node
// as silent for the sake of its samples.
func (p *previewRuntime) Outgoing() json.RawMessage {
	b, trimmed, err := p.shadow.NodeStats().EncodeWithin(preview.MaxPayloadBytes)
	if err != nil {
		p.log.Warn("preview stats do not encode", "error", err)
		return nil
	}
	if trimmed && p.trimmedOnce.CompareAndSwap(false, true) {
		p.log.Warn("preview stats over their heartbeat budget: samples (and, if need be, some experiments' counts) are left out of heartbeats",
			"budget_bytes", preview.MaxPayloadBytes)
	}
	return b
}

// Merge implements cluster.Piggyback on the leader: every node's stats
// merged per experiment, with per-node coverage.
func (p *previewRuntime) Merge(payloads map[string]json.RawMessage) json.RawMessage {
	all := make([]preview.NodeStats, 0, len(payloads))
	for id, raw := range payloads {
		var ns preview.NodeStats
		if err := json.Unmarshal(raw, &ns); err != nil || ns.Node != id {
			p.log.Warn("dropping preview stats that do not decode", "node", id, "error", err)
			continue
		}
		all = append(all, ns)
	}
	// The merge rides on every heartbeat's answer, which a node reads up
	// to a bound of its own: keep it within twice a node's payload. Its
	// series end at the leader's minute: a node's clock far ahead does
	// not move the hour.
	b, _, err := preview.EncodeMergedWithin(preview.MergeAt(time.Now(), all...), 2*preview.MaxPayloadBytes)
	if err != nil {
		p.log.Warn("merged preview stats do not encode", "error", err)
		return nil
	}
	return b
}

// Adopt implements cluster.Piggyback: keep the leader's merge.
func (p *previewRuntime) Adopt(merged json.RawMessage) {
	var stats []preview.Stats
	if err := json.Unmarshal(merged, &stats); err != nil {
		p.log.Warn("merged preview stats from the leader do not decode", "error", err)
		return
	}
	p.merged.Store(&stats)
}
