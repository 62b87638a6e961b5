package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// nodePortCollector exports what the node port ([tls]) holds and what it
// refused (tlsconfig.Mux.Stats), so a flood shows on a dashboard as well
// as in the rate-limited refusal log.
type nodePortCollector struct {
	stats                      func() tlsconfig.MuxStats
	refused, handshakes, conns *prometheus.Desc
}

// registerNodePortMetrics registers the node port's series; nothing
// without [tls].
func (p *nodePort) registerNodePortMetrics(reg prometheus.Registerer) {
	if p.tls == nil {
		return
	}
	reg.MustRegister(&nodePortCollector{
		stats: p.tls.mux.Stats,
		refused: prometheus.NewDesc("reconciler_node_port_refused_total",
			"Connections the node-to-node port refused, by reason (see docs/security.md).", []string{"reason"}, nil),
		handshakes: prometheus.NewDesc("reconciler_node_port_handshakes",
			"TLS handshakes in progress on the node-to-node port.", nil, nil),
		conns: prometheus.NewDesc("reconciler_node_port_connections",
			"Verified node connections open on the node-to-node port.", nil, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *nodePortCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.refused
	ch <- c.handshakes
	ch <- c.conns
}

// Collect implements prometheus.Collector.
func (c *nodePortCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, r := range tlsconfig.RefusalReasons {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused[r]), r)
	}
	ch <- prometheus.MustNewConstMetric(c.handshakes, prometheus.GaugeValue, float64(s.Handshakes))
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Connections))
}
