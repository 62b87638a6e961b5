package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// TestCompileBesideEquivalence: a policy compiled beside a base decides
// every request exactly as the same policy compiled alone (verdict, rule,
// etag and error text), over random policies, random experiments of them
// and random requests; with the same budgets the rules whose match is
// unchanged share the base's programs, with other budgets none do.
func TestCompileBesideEquivalence(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	policies, variants, requests := 60, 4, 60
	if testing.Short() || raceEnabled {
		policies = 20
	}
	r := rand.New(rand.NewPCG(20261122, 7))
	shared, total := 0, 0
	for i := range policies {
		p := genPolicy(r, 1+r.IntN(40))
		opts := DefaultOptions()
		if i%5 == 0 {
			opts.RuntimeCostLimit = uint64(100 + r.IntN(400))
		}
		base := mustCompile(t, p, opts)
		for v := range variants {
			q := mutate(r, p)
			eopts := opts
			if v == 3 {
				eopts.RuntimeCostLimit++
			}
			alone := mustCompile(t, q, eopts)
			beside, err := CompileBeside(q, eopts, base)
			if err != nil {
				t.Fatalf("policy %d variant %d: %v", i, v, err)
			}
			n := sharedRules(beside, base)
			if v == 3 && n > 0 {
				t.Fatalf("policy %d: %d rules share programs compiled under another cost limit", i, n)
			}
			shared, total = shared+n, total+len(beside.rules)
			for range requests {
				req := genRequest(r)
				if got, want := beside.Evaluate(req), alone.Evaluate(req); got != want {
					t.Fatalf("policy %d variant %d, request %+v:\nbeside %+v\nalone  %+v\nbase rules:\n%s\nrules:\n%s",
						i, v, req, got, want, ruleDump(p), ruleDump(q))
				}
			}
		}
	}
	t.Logf("%d of %d rules shared their base's programs", shared, total)
	// Sharing is the point: mutate changes at most a few rules.
	if shared < total/2 {
		t.Errorf("only %d of %d rules shared programs", shared, total)
	}
}

// sharedRules counts the rules of cp whose programs are base's.
func sharedRules(cp, base *CompiledPolicy) int {
	n := 0
	for i := range cp.rules {
		for j := range base.rules {
			if cp.rules[i].tracked == base.rules[j].tracked {
				n++
				break
			}
		}
	}
	return n
}

// TestCompileBesideChecks: a rule that reuses a base program is still
// checked as Compile checks it, and keeps its own name, action and
// priority; a base under another compile-time budget shares nothing.
func TestCompileBesideChecks(t *testing.T) {
	match := `request.method == "GET"`
	base := mustCompile(t, testPolicy(policy.ActionAllow, "", rule("a", 1, policy.ActionAllow, match)), DefaultOptions())

	bad := testPolicy(policy.ActionAllow, "", rule("b", 1, "permit", match))
	if _, err := CompileBeside(bad, DefaultOptions(), base); err == nil {
		t.Fatal("a bad action on a shared match compiled")
	}
	dup := testPolicy(policy.ActionAllow, "", rule("b", 1, policy.ActionDeny, match), rule("b", 2, policy.ActionDeny, match))
	if _, err := CompileBeside(dup, DefaultOptions(), base); err == nil {
		t.Fatal("a rule defined twice compiled")
	}

	q := testPolicy(policy.ActionAllow, "", rule("b", 5, policy.ActionDeny, match))
	cp, err := CompileBeside(q, DefaultOptions(), base)
	if err != nil {
		t.Fatal(err)
	}
	if got := cp.rules[0]; got.name != "b" || got.verdict != Deny || got.priority != 5 || got.tracked != base.rules[0].tracked {
		t.Fatalf("shared rule = %+v, want b/DENY/5 on the base's program", got)
	}
	if d := cp.Evaluate(&Request{Method: "GET"}); d.Rule != "b" || d.Verdict != Deny || d.Etag != q.Etag() {
		t.Fatalf("decision %+v", d)
	}
	if !reflect.DeepEqual(cp.cons[0], base.cons[0]) {
		t.Fatalf("constraints %v, want the base's %v", cp.cons[0], base.cons[0])
	}

	strict := DefaultOptions()
	strict.MaxRuleCost = MaxRuleCost / 2
	if cp, err := CompileBeside(q, strict, base); err != nil || sharedRules(cp, base) != 0 {
		t.Fatalf("under another compile-time budget: err %v, shared %d rules", err, sharedRules(cp, base))
	}
	if cp, err := CompileBeside(q, DefaultOptions(), nil); err != nil || len(cp.rules) != 1 {
		t.Fatalf("beside nothing: %v", err)
	}
}
