package preview

import (
	"maps"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// SetExperiments installs the live programs (by policy name) and the
// compiled experiments, replacing the previous set in one atomic swap.
// Only ACTIVE, previewed experiments with a program are evaluated; stats
// are kept for every experiment listed and dropped for the others, and
// an ACTIVE one refused on this node says why in its stats (Refused). A version (name,
// etag) seen ACTIVE for the first time is replayed against recorded
// traffic in the background, so its stats fill within seconds.
func (s *Shadow) SetExperiments(live map[string]*engine.CompiledPolicy, exps []CompiledExperiment) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	old := s.view.Load()
	v := &view{generation: old.generation, live: maps.Clone(live), active: map[string][]*entry{}}
	if v.live == nil {
		v.live = map[string]*engine.CompiledPolicy{}
	}
	names := map[string]bool{}
	var fresh []replayJob
	for _, ce := range exps {
		e := ce.Experiment
		if e == nil {
			continue
		}
		names[e.Name] = true
		if !e.IsActive() {
			continue
		}
		c, created := s.stats.get(e.Name, e.Etag)
		c.setRefused(ce.Refused)
		if ce.Program == nil {
			continue // refused on this node: its stats say why
		}
		pol := e.PolicyName()
		en := &entry{name: e.Name, prog: ce.Program, cell: c}
		v.active[pol] = append(v.active[pol], en)
		if created {
			fresh = append(fresh, replayJob{policy: pol, entry: en})
		}
	}
	v.complete()
	s.stats.retain(names)
	s.view.Store(v)
	for _, job := range fresh {
		s.queueReplay(v, job)
	}
}

// SetLive switches the live programs and generation, keeping the
// experiments; the node calls it when a generation is activated.
func (s *Shadow) SetLive(generation uint64, live map[string]*engine.CompiledPolicy) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	old := s.view.Load()
	// The same experiments (entries are immutable), evaluated from the new
	// live policies' decisions: complete rebuilds the sets.
	v := &view{generation: generation, live: maps.Clone(live), active: old.active}
	if v.live == nil {
		v.live = map[string]*engine.CompiledPolicy{}
	}
	v.complete()
	s.view.Store(v)
}

// complete derives what workers need from v's live policies and ACTIVE
// experiments: each policy's experiments prepared for evaluation from the
// live decision, and the no-op decision of every policy that has
// experiments but no live version (a new policy being previewed).
func (v *view) complete() {
	v.sets, v.noLive = make(map[string]*engine.DeltaSet, len(v.active)), map[string]engine.Decision{}
	for pol, entries := range v.active {
		progs := make([]*engine.CompiledPolicy, len(entries))
		for i, e := range entries {
			progs[i] = e.prog
		}
		v.sets[pol] = engine.NewDeltaSet(v.live[pol], progs)
		if v.live[pol] == nil {
			v.noLive[pol] = noOpDecision(pol)
		}
	}
}

func noOpDecision(pol string) engine.Decision {
	return engine.Decision{Verdict: engine.Allow, Policy: "policies/" + pol, Etag: NoOp(nil, pol).Etag()}
}

// liveDecision evaluates the live policy, or the no-op when there is none.
func (v *view) liveDecision(pol string, req *engine.Request) engine.Decision {
	if p := v.live[pol]; p != nil {
		return p.Evaluate(req)
	}
	if d, ok := v.noLive[pol]; ok {
		return d
	}
	return noOpDecision(pol)
}

// queueReplay hands a new version to the replayer with the requests
// recorded so far: those that arrive later are evaluated live, so no
// request is counted both live and replayed.
func (s *Shadow) queueReplay(v *view, job replayJob) {
	if s.rec == nil {
		return
	}
	job.view, job.reqs = v, s.rec.Requests(job.policy)
	select {
	case s.replays <- job:
	default:
		s.cfg.Logger.Debug("replay queue full; experiment will fill from live traffic only", "experiment", job.entry.name)
	}
}

// maxUnsettled bounds the requests a busy worker processes before it
// flushes the preview log and counts them.
const maxUnsettled = 256

// worker evaluates queued requests until Stop. It polls rather than
// blocking on the queue: see Config.PollInterval.
func (s *Shadow) worker() {
	defer s.wg.Done()
	idle := time.NewTimer(s.cfg.PollInterval)
	defer idle.Stop()
	// done counts requests processed since the last flush: they count as
	// processed once their log lines are written, so Status.Processed
	// never runs ahead of the preview log.
	done := uint64(0)
	settle := func() {
		s.plog.flush()
		s.processed.Add(done)
		done = 0
	}
	defer settle()
	var ws workerScratch
	for !s.abort.Load() {
		select {
		case it := <-s.queue:
			s.process(it, &ws)
			if done++; done == maxUnsettled {
				settle()
			}
			continue
		default:
		}
		settle()
		if s.draining.Load() {
			return
		}
		idle.Reset(s.cfg.PollInterval)
		select {
		case <-idle.C:
		case <-s.done: // Stop: drain what is queued, then return
		}
	}
}

// process records one request and evaluates every ACTIVE experiment of
// its policy against it, logging changed (and sampled unchanged) ones.
// The worker counts it as processed.
func (s *Shadow) process(it item, ws *workerScratch) {
	if s.rec != nil {
		s.rec.AddDecoded(it.policy, it.req, it.body)
	}
	entries := it.view.active[it.policy]
	if len(entries) == 0 {
		return
	}
	now := s.cfg.Now()
	live := it.live
	if it.mirror {
		live = it.view.liveDecision(it.policy, it.req)
	}
	ws.decs = it.view.sets[it.policy].Evaluate(it.req, live, ws.decs)
	logged := false
	for k, e := range entries {
		d := ws.decs[k]
		changed, logUnchanged := e.cell.observe(live, d, it.req, now, false, s.redact, s.cfg.UnchangedEvery)
		if (changed || logUnchanged) && s.cfg.Log != nil {
			if !logged {
				ws.logRequest(now, it.req, s.redact)
				logged = true
			}
			line := newLogLine(ws.at, e.name, it.view.generation, live, d, changed, s.cfg.Node)
			line.Request, line.requestJSON = ws.reqMap, ws.reqJSON
			s.plog.write(&line)
		}
	}
}

// workerScratch is a worker's reusable space for one request at a time.
type workerScratch struct {
	decs []engine.Decision // the experiments' decisions
	// The request as its log lines carry it, made for the first line and
	// shared by the others: the time, and the redacted request encoded
	// (reqJSON) or, when AppendJSON cannot, as a map.
	at      string
	reqJSON []byte
	reqMap  map[string]any
}

func (ws *workerScratch) logRequest(now time.Time, req *engine.Request, red *Redactor) {
	ws.at = now.UTC().Format(time.RFC3339Nano)
	var ok bool
	if ws.reqJSON, ok = red.AppendJSON(ws.reqJSON[:0], req); ok {
		ws.reqMap = nil
		return
	}
	ws.reqJSON, ws.reqMap = nil, red.Request(req)
}

// replayer runs the background replays queued by SetExperiments.
func (s *Shadow) replayer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case job := <-s.replays:
			s.replay(job)
		}
	}
}

// Replay evaluates ce against the recorded requests of its policy, under
// the current live policy, counting into its replayed stats (kept apart
// from live-mirrored ones and never logged). It returns how many requests
// it replayed. SetExperiments does this by itself for new versions.
func (s *Shadow) Replay(ce CompiledExperiment) int {
	if s.rec == nil || ce.Program == nil || ce.Experiment == nil {
		return 0
	}
	e := ce.Experiment
	c, _ := s.stats.get(e.Name, e.Etag)
	pol := e.PolicyName()
	return s.replay(replayJob{view: s.view.Load(), policy: pol, entry: &entry{name: e.Name, prog: ce.Program, cell: c},
		reqs: s.rec.Requests(pol)})
}

// replayJob is a replay: the version's entry, the requests to replay and
// the view (live policies) it became active in.
type replayJob struct {
	view   *view
	policy string
	entry  *entry
	reqs   []*engine.Request
}

func (s *Shadow) replay(job replayJob) int {
	delta := engine.NewDelta(job.entry.prog, job.view.live[job.policy])
	n := 0
	for _, req := range job.reqs {
		if s.abort.Load() {
			break
		}
		at := req.Time
		if at.IsZero() {
			at = s.cfg.Now()
		}
		live := job.view.liveDecision(job.policy, req)
		job.entry.cell.observe(live, delta.Evaluate(req, live), req, at, true, s.redact, 0)
		n++
	}
	return n
}
