package experiments

import (
	"slices"

	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// A policy's tests are what keeps its next change honest, so an API
// experiment never loses them by omission (issue 24): a create body
// without "tests" gets the live policy's tests, an update body without
// them keeps the experiment's; only an explicit "tests": [] (or a list
// without some) removes tests, and the commit operation says how many.

// livePolicy is pol as the active generation holds it; nil when there is
// none or it does not load.
func (s *Service) livePolicy(st *raftstore.State, pol string) *policy.Policy {
	g, ok := st.ActiveGeneration()
	if !ok || g.Etags[pol] == "" {
		return nil
	}
	p, err := policy.LoadPolicy(policy.TreeFS(g.Files), pol, s.cfg.LoadOptions)
	if err != nil {
		s.log.Warn("cannot read the live policy's tests", "policy", pol, "error", err)
		return nil
	}
	return p
}

// withLists is in with the live policy's lists, which an API body cannot
// carry (policy.Policy.UseLists).
func withLists(in preview.Input, live *policy.Policy) preview.Input {
	if in.Policy != nil && live != nil {
		in.Policy = in.Policy.UseLists(live.Lists)
	}
	return in
}

// withTests is in with tests when its policy left "tests" out (JSON
// absent or null decodes to nil; [] to an empty list).
func withTests(in preview.Input, tests []policy.Test) preview.Input {
	if in.Policy == nil || in.Policy.Tests != nil || len(tests) == 0 {
		return in
	}
	c := *in.Policy
	c.Tests = slices.Clone(tests)
	in.Policy = &c
	return in
}

// testsRemoved is how many tests of live (by name) p does not have.
func testsRemoved(live, p *policy.Policy) *int {
	n := 0
	if live != nil {
		for _, t := range live.Tests {
			if p == nil || !slices.ContainsFunc(p.Tests, func(o policy.Test) bool { return o.Name == t.Name }) {
				n++
			}
		}
	}
	return &n
}
