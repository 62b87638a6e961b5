package api

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// decisions serves the data plane: :evaluate, the gateway forms
// (:authorize, the HTTP and gRPC ext_authz paths), :mirror and the offer
// of every answered decision to preview. It holds the bounds of decision
// requests and the decision statistics.
type decisions struct {
	*core
	gens    Generations
	mirror  Mirror
	preview decisionPreview
	// cluster names the generation kept before the active one, for a
	// pinned request that asks for another; nil without a cluster.
	cluster stateReader
	states  NodeState
	group   string
	now     func() time.Time
	// realClock is now being time.Now: a decision then reads the clock
	// once for its receipt time, its latency and its body deadline.
	realClock bool

	trusted []netip.Prefix
	slashes engine.EscapedSlashes
	failure FailureModes

	undecidedTotal *prometheus.CounterVec
	// unenforcedLog bounds the TEST decisions logged (nodes_state.go).
	unenforcedLog *logging.Limiter
	stats         *decisionStats

	// maxHeaders, inflight and bodies bound decision requests (limits.go,
	// bodies.go).
	maxHeaders int
	inflight   *inFlight
	bodies     *bodyGate
}

// decisionPreview is the preview runtime as decisions use it.
type decisionPreview interface {
	Offer(policy string, d engine.Decision, req *engine.Request)
	Previewing(policy string) bool
}

// stateReader reads the replicated state.
type stateReader interface {
	State() *raftstore.State
}

func newDecisions(c *core, cfg Config, reg *prometheus.Registry, now func() time.Time) *decisions {
	d := &decisions{
		core:      c,
		gens:      cfg.Generations,
		mirror:    cfg.Mirror,
		preview:   cfg.Preview,
		cluster:   cfg.Cluster,
		states:    cfg.States,
		group:     cfg.Group,
		now:       now,
		realClock: cfg.Now == nil,
		trusted:   cfg.TrustedProxies,
		slashes:   cfg.PathEscapedSlashes,
		failure:   cfg.FailureModes,

		undecidedTotal: newUndecidedCounter(reg),
		unenforcedLog:  logging.NewLimiter(unenforcedLines, time.Second),
		stats:          &decisionStats{},
		inflight:       newInFlight(reg, cfg.MaxDecisionsInFlight),
		bodies:         newBodyGate(reg, cfg, c.maxBody),
		maxHeaders:     cfg.MaxRequestHeaders,
	}
	if d.maxHeaders <= 0 {
		d.maxHeaders = engine.DefaultMaxHeaders
	}
	return d
}

// errNotKept says which generations a pinned request can use instead.
func (s *decisions) errNotKept(n uint64, cur *Snapshot) error {
	kept := "the active generation " + strconv.FormatUint(cur.Generation, 10)
	if s.cluster != nil {
		if p := s.cluster.State().Previous; p != 0 && s.gens.Get(p) != nil {
			kept += " and the one before it, " + strconv.FormatUint(p, 10)
		}
	}
	return errorf(errs.NotFound, "generation %d is not kept on this node: a node keeps only the active generation and the one before it; use %s",
		n, kept)
}
