package api

import "github.com/policyrollout/reconciler/internal/preview"

// policies serves the policy resources and their experiments: the
// policies of the generation this node serves, with their rules in
// preview, and the experiments of the replicated state, whose writes the
// leader's experiment service runs.
type policies struct {
	*core
	gens Generations
	// cluster is where the experiments are read; nil without a cluster.
	cluster     stateReader
	experiments Experiments
	preview     previewStatsReader
	thresholds  preview.ThresholdSet
	ruleCap     int
}

// previewStatsReader is the preview runtime as the resources read it:
// the cluster's merged stats.
type previewStatsReader interface {
	Stats() []preview.Stats
}

func newPolicies(c *core, cfg Config) *policies {
	return &policies{core: c, gens: cfg.Generations, cluster: cfg.Cluster, experiments: cfg.Experiments,
		preview: cfg.Preview, thresholds: cfg.Thresholds, ruleCap: cfg.PreviewRuleCap}
}
