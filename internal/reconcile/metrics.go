package reconcile

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the leader loop's series. Only the leader moves them; they
// are registered on every node so that a dashboard finds them wherever
// the leader is.
type metrics struct {
	reconciles *prometheus.CounterVec
	promotions prometheus.Counter
	latency    prometheus.Histogram
	fetches    *prometheus.CounterVec
	fetchTime  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "reconcile_total",
			Help: "Reconcile passes and commits of the leader loop, by result (staged, invalid, superseded, no_policy_change, unchanged, pull_error, error).",
		}, []string{"result"}),
		promotions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "promotions_total",
			Help: "Generations this node activated as leader.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "reconciler", Name: "promotion_duration_seconds",
			Help:    "Time from staging a generation to activating it (every reachable node compiled it).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "git_fetch_total",
			Help: "Fetches of the policy repository by the leader, by result (ok, or the failure reason).",
		}, []string{"result"}),
		fetchTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "reconciler", Name: "git_fetch_duration_seconds",
			Help:    "Time of one fetch of the policy repository (a ref listing when nothing moved).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.reconciles, m.promotions, m.latency, m.fetches, m.fetchTime)
	}
	return m
}

func (m *metrics) fetched(err error, took time.Duration) {
	m.fetchTime.Observe(took.Seconds())
	result := "ok"
	if err != nil {
		if result = reasonOf(err); result == "" {
			result = "error"
		}
	}
	m.fetches.WithLabelValues(result).Inc()
}

func (m *metrics) result(r string) { m.reconciles.WithLabelValues(r).Inc() }

func (m *metrics) promoted(took time.Duration) {
	m.promotions.Inc()
	m.latency.Observe(took.Seconds())
}
