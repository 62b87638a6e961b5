package preview

import (
	"fmt"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/mdcheck"
)

// Fixture is changed policy i of a pull request: with live counts,
// transitions, samples and nodes; every 7th fails its threshold, every
// 11th is not previewed.
func Fixture(i int) Summary {
	name := fmt.Sprintf("policy-%03d", i)
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	limit := 0.01
	s := Summary{Policy: "policies/" + name, Experiment: "policies/" + name + "/experiments/pr-7", Kind: KindUpdate,
		ExperimentEtag: fmt.Sprintf("exp-%08x", i*2654435761%(1<<32)), LiveEtag: fmt.Sprintf("live-%08x", i*40503),
		State: Active, Thresholds: Thresholds{MaxAllowToDenyRatio: &limit}}
	a2d, d2a := uint64(i%13), uint64(i%5)
	s.Stats = Stats{Experiment: s.Experiment, ExperimentEtag: s.ExperimentEtag, LiveEtag: s.LiveEtag,
		Tally: Tally{Counts: Counts{Evaluated: 1000, Unchanged: 1000 - a2d - d2a - 2, AllowToDeny: a2d, DenyToAllow: d2a, RuleChanged: 2}}}
	for k := range 3 {
		rule := fmt.Sprintf("rule-%d-%d", i, k)
		s.Stats.Transitions = append(s.Stats.Transitions, Transition{LiveRule: "", ExperimentRule: rule,
			LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: uint64(k + 1)})
		s.Stats.Samples = append(s.Stats.Samples, Sample{Time: start, LiveDecision: engine.Allow, ExperimentDecision: engine.Deny,
			ExperimentRule: rule, Request: map[string]any{"method": "GET", "path": fmt.Sprintf("/api/%d/%d", i, k), "headers": map[string]any{"x-user": "[redacted]"}}})
	}
	s.Stats.Window = &Window{Start: start, End: start.Add(time.Hour)}
	s.Stats.Nodes = []NodeCoverage{{Node: "n1", Evaluated: 400}, {Node: "n2", Evaluated: 300}, {Node: "n3", Evaluated: 300}}
	if i%7 == 3 {
		s.Failing, s.Reason = true, fmt.Sprintf("ALLOW→DENY for 1.%02d%% of live traffic, over max_allow_to_deny_ratio 0.01", i%100)
	}
	if i%11 == 5 {
		s.NotPreviewed = "the policy does not load or compile at this head"
		s.Stats = Stats{Experiment: s.Experiment, ExperimentEtag: s.ExperimentEtag}
		s.Failing, s.Reason = false, ""
	}
	return s
}

// Fixtures are changed policies 0 to n-1.
func Fixtures(n int) []Summary {
	out := make([]Summary, n)
	for i := range out {
		out[i] = Fixture(i)
	}
	return out
}

// CheckComment is mdcheck.Check of a preview comment.
func CheckComment(body string, limit int) []string { return mdcheck.Check(body, limit, Marker) }
