package api

import (
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/engine"
)

// decisionStats counts this node's decisions for its PDP_STATUS (ONAP's
// policy executed count / success / fail). Two atomic adds per decision,
// no allocation and no lock, so the decision path does not slow down
// (BenchmarkEvaluateStatistics).
type decisionStats struct {
	ok, failed atomic.Uint64
}

// count records d: a decision whose evaluation hit a run-time error (it
// fell back to its rule's on_error) counts as failed.
func (s *decisionStats) count(d *engine.Decision) {
	if s == nil {
		return
	}
	if d.Error != "" {
		s.failed.Add(1)
	} else {
		s.ok.Add(1)
	}
}

// DecisionStats returns the decisions this node answered since it
// started: those evaluated without error, and those that hit one.
func (s *decisions) DecisionStats() (ok, failed uint64) {
	if s.stats == nil {
		return 0, 0
	}
	return s.stats.ok.Load(), s.stats.failed.Load()
}
