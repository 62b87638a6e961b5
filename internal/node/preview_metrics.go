package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/preview"
)

// previewCollector exports this node's counts of each experiment and rule
// in preview it evaluates now (preview.Shadow.ActiveStats): label values
// are bounded by preview.max_experiments_per_policy per policy, for
// experiments and for rules in preview alike, and a name leaves the
// series once it is no longer evaluated. Each node exports what it saw;
// sum over instances for the cluster's.
type previewCollector struct {
	shadow *preview.Shadow
	descs  []previewSeries
}

// previewSeries is one counter and how to read it from Counts.
type previewSeries struct {
	desc *prometheus.Desc
	get  func(preview.Counts) uint64
}

func newPreviewCollector(sh *preview.Shadow) *previewCollector {
	labels := []string{"policy", "experiment", "kind"}
	d := func(name, help string, get func(preview.Counts) uint64) previewSeries {
		return previewSeries{prometheus.NewDesc("reconciler_preview_"+name+"_total", help, labels, nil), get}
	}
	return &previewCollector{shadow: sh, descs: []previewSeries{
		d("evaluated", "Live requests evaluated beside the live policy, by experiment or rule in preview.",
			func(c preview.Counts) uint64 { return c.Evaluated }),
		d("changed", "Evaluations whose decision or deciding rule differs from live.",
			func(c preview.Counts) uint64 { return c.Changed() }),
		d("allow_to_deny", "Evaluations that would turn a live allow into a deny.",
			func(c preview.Counts) uint64 { return c.AllowToDeny }),
		d("deny_to_allow", "Evaluations that would turn a live deny into an allow.",
			func(c preview.Counts) uint64 { return c.DenyToAllow }),
		d("dropped", "Live requests not evaluated because the preview queue was full.",
			func(c preview.Counts) uint64 { return c.Dropped }),
	}}
}

// Describe implements prometheus.Collector.
func (c *previewCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.descs {
		ch <- s.desc
	}
}

// Collect implements prometheus.Collector. The counts restart when an
// experiment gets a new version (a push), which Prometheus reads as a
// counter reset.
func (c *previewCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.shadow.ActiveStats() {
		pol, id, kind := previewLabels(st.Experiment)
		for _, s := range c.descs {
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(s.get(st.Counts)), pol, id, kind)
		}
	}
}

// previewLabels splits a stats name into policy, experiment id (or rule
// name) and kind ("experiment" or "rule").
func previewLabels(name string) (pol, id, kind string) {
	if p, rule, ok := preview.ParseRuleName(name); ok {
		return p, rule, "rule"
	}
	p, id, _ := preview.ParseName(name)
	return p, id, "experiment"
}
