package node

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeMetrics are the loader's series.
type nodeMetrics struct {
	compiles *prometheus.CounterVec
	switches prometheus.Counter
	failures prometheus.Counter // nodes past the heartbeat timeout (leader)

	// Deploy statistics for the PDP_STATUS: generations compiled.
	deployOK, deployFailed atomic.Uint64
}

func newNodeMetrics(reg prometheus.Registerer) *nodeMetrics {
	m := &nodeMetrics{
		compiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "generation_compiles_total",
			Help: "Generations this node compiled from the replicated state, by result (ok, failed).",
		}, []string{"result"}),
		switches: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "generation_switches_total",
			Help: "Times this node switched the generation it serves (the first load included).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "reconciler", Name: "node_heartbeat_failures_total",
			Help: "Nodes this node, as leader, marked failed for missing their heartbeats past node.heartbeat_timeout.",
		}),
	}
	reg.MustRegister(m.compiles, m.switches, m.failures)
	return m
}

func (m *nodeMetrics) compiled(ok bool) {
	if ok {
		m.compiles.WithLabelValues("ok").Inc()
		m.deployOK.Add(1)
	} else {
		m.compiles.WithLabelValues("failed").Inc()
		m.deployFailed.Add(1)
	}
}

func (m *nodeMetrics) switched() { m.switches.Inc() }

// raftStates are the values of reconciler_raft_state's label.
var raftStates = []string{"Leader", "Follower", "Candidate", "Shutdown"}

// raftCollector exports raft's state as reconciler_raft_state{state}: 1
// for the current state, 0 for the others.
type raftCollector struct {
	state func() string
	desc  *prometheus.Desc
}

func newRaftCollector(state func() string) *raftCollector {
	return &raftCollector{state: state, desc: prometheus.NewDesc("reconciler_raft_state",
		"Raft state of this node: 1 for the current one (Leader, Follower, Candidate, Shutdown).",
		[]string{"state"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.state()
	for _, s := range raftStates {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s)
	}
}
