package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// TestDeltaSetEquivalence: several experiments beside one live policy,
// evaluated together from the live decision, each give exactly what
// evaluating them from scratch gives: identical experiments, edited ones,
// one under another cost limit (always in full), one without an index,
// from live decisions of the current and of a stale version.
func TestDeltaSetEquivalence(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	policies, requests := 60, 100
	if testing.Short() || raceEnabled {
		policies = 20
	}
	r := rand.New(rand.NewPCG(20261122, 9))
	walks := 0
	for i := range policies {
		p := genPolicy(r, 1+r.IntN(50))
		opts := DefaultOptions()
		base := mustCompile(t, p, opts)
		other := mustCompile(t, mutate(r, p), opts)
		var exps []*CompiledPolicy
		for v := range 1 + r.IntN(12) {
			q, eopts := mutate(r, p), opts
			switch {
			case v == 0:
				q = p
			case v == 5:
				eopts.RuntimeCostLimit = opts.RuntimeCostLimit + 1
			case v == 7 && i%3 == 0:
				eopts.DisableIndex = true
			}
			exps = append(exps, mustCompile(t, q, eopts))
		}
		set := NewDeltaSet(base, exps)
		var out []Decision
		for range requests {
			req := genRequest(r)
			live := base.Evaluate(req)
			for _, from := range []Decision{live, other.Evaluate(req)} {
				out = set.Evaluate(req, from, out)
				if len(out) != len(exps) {
					t.Fatalf("%d decisions for %d experiments", len(out), len(exps))
				}
				for k, exp := range exps {
					if want := exp.Evaluate(req); out[k] != want {
						t.Fatalf("policy %d experiment %d, request %+v, live %+v:\nset  %+v\nfull %+v\nlive rules:\n%s",
							i, k, req, from, out[k], want, ruleDump(p))
					}
				}
			}
			w := walk{s: set, p: set.basePosition(live)}
			for k := range exps {
				if stop := w.stop(k); stop >= 0 && set.exps[k].first < stop {
					walks++
					break
				}
			}
		}
	}
	// The comparison says little if the changed rules were never walked.
	total := policies * requests
	t.Logf("the changed rules were walked for %d of %d requests", walks, total)
	if walks < total/8 {
		t.Errorf("the changed rules were walked for only %d of %d requests", walks, total)
	}
}

// TestDeltaSetMany: more experiments than the walk's inline bookkeeping
// holds, and a nil live policy (a new policy: every experiment in full).
func TestDeltaSetMany(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	r := rand.New(rand.NewPCG(7, 7))
	p := genPolicy(r, 8)
	base := mustCompile(t, p, DefaultOptions())
	var exps []*CompiledPolicy
	for range 300 {
		exps = append(exps, mustCompile(t, mutate(r, p), DefaultOptions()))
	}
	for _, set := range []*DeltaSet{NewDeltaSet(base, exps), NewDeltaSet(nil, exps[:3])} {
		var out []Decision
		for range 50 {
			req := genRequest(r)
			out = set.Evaluate(req, base.Evaluate(req), out)
			for k, e := range set.exps {
				if want := e.cp.Evaluate(req); out[k] != want {
					t.Fatalf("experiment %d of %d: %+v, want %+v", k, len(set.exps), out[k], want)
				}
			}
		}
	}
}

// BenchmarkDeltaSet compares ten experiments (each flips one action of the
// 100-rule firewall policy) evaluated one by one from the live decision
// with the same ten evaluated as one set: one index walk instead of ten.
func BenchmarkDeltaSet(b *testing.B) {
	p := firewallPolicy(100, 42)
	live := mustCompile(b, p, DefaultOptions())
	var exps []*CompiledPolicy
	var deltas []*Delta
	for v := range 10 {
		q := *p
		q.Rules = slices.Clone(p.Rules)
		r := &q.Rules[5+9*v]
		r.Action = map[policy.Action]policy.Action{policy.ActionAllow: policy.ActionDeny, policy.ActionDeny: policy.ActionAllow}[r.Action]
		exp := mustCompile(b, &q, DefaultOptions())
		exps, deltas = append(exps, exp), append(deltas, NewDelta(exp, live))
	}
	set := NewDeltaSet(live, exps)
	reqs := fwRequests(1024, 7)
	decisions := make([]Decision, len(reqs))
	for i, r := range reqs {
		decisions[i] = live.Evaluate(r)
	}
	b.Run(fmt.Sprintf("each/%d", len(exps)), func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			for _, d := range deltas {
				d.Evaluate(reqs[i&1023], decisions[i&1023])
			}
		}
	})
	b.Run(fmt.Sprintf("set/%d", len(exps)), func(b *testing.B) {
		var out []Decision
		for i := 0; b.Loop(); i++ {
			out = set.Evaluate(reqs[i&1023], decisions[i&1023], out)
		}
	})
}
