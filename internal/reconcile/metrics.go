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
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "reconcile_total",
			Help: "Reconcile passes of the leader loop, by result (staged, invalid, unchanged, pull_error, error).",
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
	}
	if reg != nil {
		reg.MustRegister(m.reconciles, m.promotions, m.latency)
	}
	return m
}

func (m *metrics) result(r string) { m.reconciles.WithLabelValues(r).Inc() }

func (m *metrics) promoted(took time.Duration) {
	m.promotions.Inc()
	m.latency.Observe(took.Seconds())
}
