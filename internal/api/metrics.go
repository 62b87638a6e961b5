package api

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/policyrollout/reconciler/internal/engine"
)

// metrics are the API's Prometheus series, on the node's own registry.
type metrics struct {
	reg        *prometheus.Registry
	decisions  *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	mirrors    *prometheus.CounterVec
	httpErrors *prometheus.CounterVec
	// perPolicy caches the labelled series of each policy, so the decision
	// path does no label hashing. Policy names are bounded: only policies
	// that exist in a generation are ever counted.
	perPolicy sync.Map // string → *policySeries
	// last is the series of the policy decided last: a node usually
	// answers for one policy at a time, and comparing its name costs less
	// than hashing it into perPolicy.
	last atomic.Pointer[policySeries]
}

type policySeries struct {
	policy              string
	allow, deny, mirror prometheus.Counter
	latency             prometheus.Observer
}

func newMetrics(reg *prometheus.Registry, gens Generations) *metrics {
	m := &metrics{
		reg: reg,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "decisions_total",
			Help: "Decisions answered, by policy and decision (ALLOW or DENY).",
		}, []string{"policy", "decision"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "reconciler", Name: "decision_duration_seconds",
			Help:    "Time from receiving a decision request to writing the answer.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 2.5, 12),
		}, []string{"policy"}),
		mirrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "mirror_total",
			Help: "Mirrored requests received for preview, by policy.",
		}, []string{"policy"}),
		httpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "http_errors_total",
			Help: "HTTP error answers, by status code.",
		}, []string{"code"}),
	}
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "reconciler", Name: "active_generation",
		Help: "The policy generation this node answers from (0 before the first).",
	}, func() float64 {
		if snap := gens.Current(); snap != nil {
			return float64(snap.Generation)
		}
		return 0
	})
	reg.MustRegister(m.decisions, m.latency, m.mirrors, m.httpErrors, active,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) series(policy string) *policySeries {
	if l := m.last.Load(); l != nil && l.policy == policy {
		return l
	}
	if ps, ok := m.perPolicy.Load(policy); ok {
		m.last.Store(ps.(*policySeries))
		return ps.(*policySeries)
	}
	ps := &policySeries{
		policy:  policy,
		allow:   m.decisions.WithLabelValues(policy, string(engine.Allow)),
		deny:    m.decisions.WithLabelValues(policy, string(engine.Deny)),
		mirror:  m.mirrors.WithLabelValues(policy),
		latency: m.latency.WithLabelValues(policy),
	}
	actual, _ := m.perPolicy.LoadOrStore(policy, ps)
	return actual.(*policySeries)
}

func (m *metrics) decided(policy string, v engine.Verdict, took time.Duration) {
	ps := m.series(policy)
	if v == engine.Allow {
		ps.allow.Inc()
	} else {
		ps.deny.Inc()
	}
	ps.latency.Observe(took.Seconds())
}

func (m *metrics) mirrored(policy string) { m.series(policy).mirror.Inc() }

func (m *metrics) httpError(code int) {
	m.httpErrors.WithLabelValues(strconv.Itoa(code)).Inc()
}
