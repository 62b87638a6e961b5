package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Timing of the preview runtime.
const (
	// previewPoll is how often the runtime re-checks the served generation
	// (the loader publishes it on its own goroutine) and the state.
	previewPoll = 200 * time.Millisecond
	// statsInterval is how often a node sends its preview stats to the
	// leader (a stats heartbeat beside the cluster's heartbeat).
	statsInterval = time.Second
	// statsStale drops a node's stats from the merge when it has not
	// reported for this long.
	statsStale = 2 * time.Minute
)

// previewRuntime is one node's preview (internal/preview): a Shadow fed
// after each live decision and by :mirror, the experiments of the
// replicated state compiled off the raft path, the preview log in
// {data_dir}/preview.log, and the stats: every node sends its NodeStats to
// the leader, which merges them and answers with the merge, so every node
// can show the cluster's stats of an experiment.
type previewRuntime struct {
	nodeID   string
	store    *raftstore.Store
	gens     *generations
	shadow   *preview.Shadow
	compiler *preview.Compiler
	logFile  *preview.RotatingFile
	client   *http.Client
	token    string
	log      hclog.Logger

	lastSnap  *api.Snapshot
	lastExps  uint64
	live      map[string]*engine.CompiledPolicy
	seed      maphash.Seed
	compileMu sync.Mutex

	mu      sync.Mutex
	reports map[string]nodeReport // leader: last stats of each node
	merged  atomic.Pointer[[]preview.Stats]
}

type nodeReport struct {
	stats preview.NodeStats
	at    time.Time
}

var _ api.Preview = (*previewRuntime)(nil)
var _ api.Mirror = (*previewRuntime)(nil)

// newPreviewRuntime builds the runtime from [preview]; the shadow starts
// with start.
func (m *Main) newPreviewRuntime(client *http.Client, token string, eopts engine.Options) (*previewRuntime, error) {
	cfg := m.Config.Preview
	log := m.Logger.Named("preview")
	f, err := preview.OpenRotating(m.Config.Node.DataDir+"/preview.log", cfg.LogMaxBytes, 5)
	if err != nil {
		return nil, fmt.Errorf("open the preview log: %w", err)
	}
	redact := cfg.Redact
	if redact == nil {
		redact = preview.DefaultRedact
	}
	unchanged := cfg.LogUnchangedEvery
	if unchanged == 0 {
		unchanged = -1 // 0 in the file means "never"
	}
	sh := preview.New(preview.Config{
		Node: m.Config.Node.ID, Workers: cfg.Workers, QueueSize: cfg.QueueSize, Redact: redact,
		Log: f, UnchangedEvery: unchanged, RecordRequests: recordRequests(cfg.RecordRequests), Logger: log,
	})
	return &previewRuntime{
		nodeID: m.Config.Node.ID, store: m.store, gens: &m.gens, shadow: sh, logFile: f,
		compiler: preview.NewCompiler(eopts), client: client, token: token, log: log,
		seed: maphash.MakeSeed(), reports: map[string]nodeReport{},
	}, nil
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
	p.compileMu.Lock()
	compiled, cerrs := p.compiler.CompileAll(exps)
	p.compileMu.Unlock()
	for name, err := range cerrs {
		p.log.Warn("experiment does not compile on this node; not previewed", "experiment", name, "error", err)
	}
	p.shadow.SetExperiments(p.live, compiled)
	active := 0
	for _, ce := range compiled {
		if ce.Experiment.IsActive() {
			active++
		}
	}
	p.log.Debug("experiments installed", "experiments", len(compiled), "active", active)
}

// fingerprint hashes the experiment documents of st.
func (p *previewRuntime) fingerprint(st *raftstore.State) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	for _, name := range slices.Sorted(maps.Keys(st.Experiments)) {
		if !strings.HasPrefix(name, "policies/") {
			continue
		}
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

// Mirror implements api.Mirror.
func (p *previewRuntime) Mirror(_ *api.Snapshot, policyName string, req *engine.Request) {
	p.shadow.Mirror(policyName, req)
}

// Previewing implements api.Preview.
func (p *previewRuntime) Previewing(policyName string) bool { return p.shadow.Previewing(policyName) }

// Status implements api.Preview.
func (p *previewRuntime) Status() preview.Status { return p.shadow.Status() }

// Stats implements api.Preview: the cluster's merged stats, computed here
// on the leader, else the leader's last answer to this node's report.
func (p *previewRuntime) Stats() []preview.Stats {
	if p.store.IsLeader() {
		p.record(p.shadow.NodeStats())
		return p.mergeReports()
	}
	if m := p.merged.Load(); m != nil {
		return *m
	}
	return preview.Merge(p.shadow.NodeStats())
}

// Report implements api.Preview: on the leader, a node's stats.
func (p *previewRuntime) Report(ns preview.NodeStats) ([]preview.Stats, error) {
	if !p.store.IsLeader() {
		return nil, fmt.Errorf("%w: stats go to the leader", raftstore.ErrNotLeader)
	}
	if ns.Node == "" {
		return nil, errors.New("node is required")
	}
	p.record(ns)
	return p.mergeReports(), nil
}

func (p *previewRuntime) record(ns preview.NodeStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports[ns.Node] = nodeReport{stats: ns, at: time.Now()}
}

func (p *previewRuntime) mergeReports() []preview.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var all []preview.NodeStats
	for id, r := range p.reports {
		if now.Sub(r.at) > statsStale {
			delete(p.reports, id)
			continue
		}
		all = append(all, r.stats)
	}
	return preview.Merge(all...)
}

// runReports sends this node's stats to the leader every statsInterval
// and keeps the merged answer.
func (p *previewRuntime) runReports(ctx context.Context, c *cluster.Cluster) {
	t := time.NewTicker(statsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.store.IsLeader() {
			p.record(p.shadow.NodeStats())
			m := p.mergeReports()
			p.merged.Store(&m)
			continue
		}
		if err := p.report(ctx, c); err != nil {
			p.log.Debug("preview stats not delivered", "error", err)
		}
	}
}

// report POSTs this node's stats to the leader.
func (p *previewRuntime) report(ctx context.Context, c *cluster.Cluster) error {
	id := c.Leader()
	n, ok := c.State().Nodes[id]
	if id == "" || !ok || n.HTTPAddr == "" {
		return errors.New("no leader address known")
	}
	body, err := json.Marshal(p.shadow.NodeStats())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*statsInterval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.HTTPAddr+api.PreviewReportPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cluster.ForwardedHeader, p.nodeID)
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("leader answered %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	var out api.PreviewReportAnswer
	if err := json.Unmarshal(data, &out); err != nil {
		return err
	}
	p.merged.Store(&out.Stats)
	return nil
}
