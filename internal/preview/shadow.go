package preview

import (
	"context"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/engine"
)

// Defaults of Config.
const (
	DefaultQueueSize      = 4096
	DefaultSamples        = 20
	DefaultRecordRequests = 10_000
	DefaultRecordBytes    = 16 << 20
	DefaultPollInterval   = time.Millisecond
)

// Config configures a Shadow. Zero values mean the defaults.
type Config struct {
	// Node is this node's id, written into log lines and NodeStats.
	Node string
	// Workers evaluate experiments; default GOMAXPROCS/4, at least 1, so
	// that shadow work leaves most CPUs to live decisions.
	Workers int
	// QueueSize bounds requests waiting for the workers; past it, requests
	// are dropped and counted.
	QueueSize int
	// PollInterval is how long an idle worker sleeps before looking at the
	// queue again. Workers poll instead of blocking on the queue so that
	// Offer never has to wake a goroutine: a send to a channel with a
	// parked receiver costs the sender a scheduler hand-off.
	PollInterval time.Duration
	// Redact lists dotted request paths to redact; nil means DefaultRedact.
	Redact []string
	// Show lists the header, query and attribute values shown (see
	// Redactor); nil means DefaultShow, empty shows none.
	Show []string
	// Samples bounds changed requests kept per experiment version.
	Samples int
	// Log receives preview log lines (e.g. a *RotatingFile); nil: none.
	Log io.Writer
	// UnchangedEvery logs 1 in N unchanged decisions; 0 means
	// DefaultUnchangedEvery, negative logs none.
	UnchangedEvery int
	// RecordRequests and RecordBytes bound the traffic recorder; negative
	// RecordRequests disables it.
	RecordRequests int
	RecordBytes    int64
	// Logger is for the shadow's own messages; nil discards.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = max(1, runtime.GOMAXPROCS(0)/4)
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Redact == nil {
		c.Redact = DefaultRedact
	}
	if c.Samples <= 0 {
		c.Samples = DefaultSamples
	}
	if c.UnchangedEvery == 0 {
		c.UnchangedEvery = DefaultUnchangedEvery
	}
	if c.RecordRequests == 0 {
		c.RecordRequests = DefaultRecordRequests
	}
	if c.RecordBytes <= 0 {
		c.RecordBytes = DefaultRecordBytes
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Shadow evaluates the ACTIVE experiments of each policy beside the live
// decision, off the live path: Offer only puts the request on a bounded
// queue (or counts a drop), and workers do the rest.
type Shadow struct {
	cfg    Config
	queue  chan item
	view   atomic.Pointer[view]
	viewMu sync.Mutex // serialises writers of view
	stats  *registry
	rec    *Recorder
	plog   *logWriter
	redact *Redactor

	running  atomic.Bool
	draining atomic.Bool // workers exit once the queue is empty
	abort    atomic.Bool // workers exit now (Stop's deadline passed)
	replays  chan replayJob
	done     chan struct{}
	wg       sync.WaitGroup
	lifeMu   sync.Mutex
	started  bool

	// processed and dropped are the only counters: a counter of offers
	// would be one more shared cache line written by every live request.
	processed, dropped atomic.Uint64
}

// item is one request waiting for the workers. view is the state at
// Offer time, so a request is compared with the experiments and live
// policy it was answered under.
type item struct {
	view   *view
	policy string
	live   engine.Decision
	req    *engine.Request
	mirror bool
	body   int // the length of the JSON body req was decoded from (OfferDecoded), else 0
}

// view is an immutable snapshot of what to evaluate; it is replaced as a
// whole (copy-on-write) and read without locks.
type view struct {
	generation uint64
	live       map[string]*engine.CompiledPolicy
	active     map[string][]*entry // by policy name: ACTIVE experiments
	// sets: by policy name, the programs of active's entries (in the same
	// order), evaluated together from the live decision: an experiment
	// usually changes a few rules, and only those need evaluating beside
	// what live established (engine.DeltaSet).
	sets   map[string]*engine.DeltaSet
	noLive map[string]engine.Decision
}

// entry is one ACTIVE experiment version.
type entry struct {
	name string
	prog *engine.CompiledPolicy
	cell *cell
}

// New returns a stopped Shadow; Start runs its workers.
func New(cfg Config) *Shadow {
	cfg = cfg.withDefaults()
	s := &Shadow{
		cfg:     cfg,
		queue:   make(chan item, cfg.QueueSize),
		stats:   newRegistry(cfg.Samples),
		plog:    &logWriter{w: cfg.Log},
		redact:  NewRedactor(cfg.Redact, cfg.Show),
		replays: make(chan replayJob, 64),
		done:    make(chan struct{}),
	}
	if cfg.RecordRequests > 0 {
		s.rec = NewRecorder(cfg.RecordRequests, cfg.RecordBytes)
	}
	s.view.Store(&view{live: map[string]*engine.CompiledPolicy{}, active: map[string][]*entry{}})
	return s
}

// Start runs the workers and the replayer. It returns at once; ctx is not
// kept (Stop ends them). A Shadow runs once: Start after Stop does nothing.
func (s *Shadow) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.started {
		return nil
	}
	s.started = true
	s.running.Store(true)
	for range s.cfg.Workers {
		s.wg.Add(1)
		go s.worker()
	}
	s.wg.Add(1)
	go s.replayer()
	return nil
}

// Stop stops taking requests and lets the workers finish what is queued.
// When ctx ends first, the rest is dropped and ctx's error returned.
func (s *Shadow) Stop(ctx context.Context) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if !s.started || !s.running.Swap(false) {
		return nil
	}
	s.draining.Store(true)
	close(s.done)
	finished := make(chan struct{})
	go func() { s.wg.Wait(); close(finished) }()
	select {
	case <-finished:
		s.dropQueued()
		return nil
	case <-ctx.Done():
		s.abort.Store(true)
		<-finished
		s.dropQueued()
		return ctx.Err()
	}
}

// dropQueued counts what is left in the queue once the workers are gone.
func (s *Shadow) dropQueued() {
	for {
		select {
		case it := <-s.queue:
			s.countDrop(it)
		default:
			return
		}
	}
}

// Status is the shadow's lifecycle state, for /v1/status.
type Status struct {
	State   string `json:"state"` // "RUNNING" or "STOPPED"
	Message string `json:"message,omitempty"`
	// Every offered request ends up processed or dropped; Queued are
	// waiting for a worker.
	Processed uint64 `json:"processed"`
	Dropped   uint64 `json:"dropped"`
	Queued    int    `json:"queued"`
	// LogErrors counts preview log lines that could not be written.
	LogErrors uint64 `json:"logErrors"`
	// LogDropped counts preview log lines dropped because the disk was
	// below the free-space watermark.
	LogDropped uint64 `json:"logDropped"`
}

// Status reports the shadow's state and counters.
func (s *Shadow) Status() Status {
	st := Status{State: "STOPPED", Processed: s.processed.Load(), Dropped: s.dropped.Load(),
		Queued: len(s.queue), LogErrors: s.plog.failed.Load(), LogDropped: s.plog.dropped.Load()}
	if s.running.Load() {
		st.State = "RUNNING"
	}
	switch {
	case st.LogErrors > 0:
		st.Message = "some preview log lines could not be written"
	case st.LogDropped > 0:
		st.Message = "some preview log lines were dropped: the disk is low on free space"
	}
	return st
}

// Offer hands a request already answered with live to preview. It never
// blocks: when the queue is full (or the shadow is stopped) the request
// is dropped and counted for each ACTIVE experiment of the policy. Offer
// keeps req; the caller must not modify it afterwards.
func (s *Shadow) Offer(policyName string, live engine.Decision, req *engine.Request) {
	s.enqueue(item{policy: policyName, live: live, req: req})
}

// OfferDecoded is Offer for a request the caller decoded from a JSON body
// of body bytes: the recorder keeps a request from a small body without
// copying it (Recorder.AddDecoded).
func (s *Shadow) OfferDecoded(policyName string, live engine.Decision, req *engine.Request, body int) {
	s.enqueue(item{policy: policyName, live: live, req: req, body: body})
}

// Mirror is Offer for a mirrored request (:mirror), which was not
// answered: the worker computes the live decision too. A policy with no
// live version is compared as a no-op that allows everything.
func (s *Shadow) Mirror(policyName string, req *engine.Request) {
	s.enqueue(item{policy: policyName, req: req, mirror: true})
}

func (s *Shadow) enqueue(it item) {
	if it.req == nil {
		return
	}
	it.view = s.view.Load()
	if s.rec == nil && len(it.view.active[it.policy]) == 0 {
		return // nothing to evaluate and nothing to record
	}
	if s.running.Load() {
		select {
		case s.queue <- it:
			return
		default:
		}
	}
	s.countDrop(it)
}

func (s *Shadow) countDrop(it item) {
	s.dropped.Add(1)
	for _, e := range it.view.active[it.policy] {
		e.cell.dropped.Add(1)
	}
}

// Stats returns this node's stats of every experiment version it keeps.
func (s *Shadow) Stats() []Stats { return s.stats.snapshot(s.cfg.Now()) }

// NodeStats is Stats labelled with the node, for heartbeats and Merge.
func (s *Shadow) NodeStats() NodeStats { return NodeStats{Node: s.cfg.Node, Stats: s.Stats()} }

// Recorder returns the traffic recorder, nil when disabled.
func (s *Shadow) Recorder() *Recorder { return s.rec }

// Previewing reports whether policyName has ACTIVE experiments, so the API
// can hand :mirror requests for a policy that is not live yet (a new
// policy being previewed) to Mirror instead of answering 404.
func (s *Shadow) Previewing(policyName string) bool {
	return len(s.view.Load().active[policyName]) > 0
}
