package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/preview"
)

// The series below exist for the alert rules of deploy/prometheus: each
// answers one question an operator is paged for, with bounded labels.

// registerPreviewQueueMetrics exports what became of the requests handed
// to the shadow evaluators: evaluated, or dropped because the queue was
// full. Their ratio says whether experiments' stats undercount.
func registerPreviewQueueMetrics(reg prometheus.Registerer, sh *preview.Shadow) {
	desc := prometheus.NewDesc("reconciler_preview_requests_total",
		"Requests handed to preview's shadow evaluators, by result (processed, dropped: the queue was full).",
		[]string{"result"}, nil)
	reg.MustRegister(collectorFunc{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		st := sh.Status()
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(st.Processed), "processed")
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(st.Dropped), "dropped")
	}})
}

// registerCertificateMetrics exports when the node certificate of [tls]
// expires, read from the loaded one so that a rotated file shows at once;
// nothing without [tls].
func (p *nodePort) registerCertificateMetrics(reg prometheus.Registerer) {
	if p.tls == nil {
		return
	}
	n := p.tls.node
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace:   "reconciler",
		Name:        "tls_certificate_expiry_timestamp_seconds",
		Help:        "When the certificate this node presents expires (seconds since the epoch), by certificate (node: [tls] cert_file).",
		ConstLabels: prometheus.Labels{"certificate": "node"},
	}, func() float64 { return float64(n.Current().NotAfter.Unix()) }))
}

// collectorFunc is a collector of one family whose values are read at
// scrape time.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

// Describe implements prometheus.Collector.
func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
