package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// mutate returns a copy of p changed the ways experiments change live
// policies: actions flipped, matches rewritten, priorities moved (which
// reorders), rules removed and added, the default and on_error changed.
func mutate(r *rand.Rand, p *policy.Policy) *policy.Policy {
	q := *p
	q.Rules = slices.Clone(p.Rules)
	for range 1 + r.IntN(4) {
		if len(q.Rules) == 0 {
			break
		}
		i := r.IntN(len(q.Rules))
		switch r.IntN(6) {
		case 0:
			q.Rules[i].Action = pick(r, []policy.Action{policy.ActionAllow, policy.ActionDeny})
		case 1:
			q.Rules[i].Match = genMatch(r, r.IntN(5) != 0)
		case 2:
			q.Rules[i].Priority = int64(r.IntN(len(q.Rules)/2 + 1))
		case 3:
			q.Rules = slices.Delete(q.Rules, i, i+1)
		case 4:
			q.Rules = append(q.Rules, policy.Rule{
				Name: fmt.Sprintf("new%d", r.IntN(1000)), Priority: int64(r.IntN(len(q.Rules)/2 + 1)),
				Action: pick(r, []policy.Action{policy.ActionAllow, policy.ActionDeny}),
				Match:  genMatch(r, r.IntN(5) != 0), Pos: policy.Pos{File: "gen/policy.toml", Line: 999},
			})
		case 5:
			q.Rules[i].Description = "only the description changed"
		}
	}
	if r.IntN(8) == 0 {
		q.DefaultAction = pick(r, []policy.Action{policy.ActionAllow, policy.ActionDeny})
	}
	if r.IntN(8) == 0 {
		q.OnError = pick(r, []policy.OnError{policy.OnErrorDeny, policy.OnErrorAllow, policy.OnErrorSkip})
	}
	q.Rules = dedupeRules(q.Rules)
	return &q
}

// dedupeRules drops rules whose name is taken by an earlier one (an added
// rule may collide), which Compile would reject.
func dedupeRules(rules []policy.Rule) []policy.Rule {
	seen := map[string]bool{}
	return slices.DeleteFunc(rules, func(r policy.Rule) bool {
		dup := seen[r.Name]
		seen[r.Name] = true
		return dup
	})
}

// TestDeltaEquivalence: over random live policies, random experiments of
// them and random requests, evaluating the experiment from the live
// decision gives exactly (verdict, rule, etag and error) what evaluating
// it from scratch gives, including when the live decision is from another
// version, carries an error, or the programs use other cost limits.
func TestDeltaEquivalence(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	policies, variants, requests := 100, 4, 100
	if testing.Short() || raceEnabled {
		policies = 30
	}
	r := rand.New(rand.NewPCG(20261121, 5))
	shortcuts := 0
	for i := range policies {
		n := 1 + r.IntN(40)
		if i%25 == 0 {
			n = 65 + r.IntN(100)
		}
		p := genPolicy(r, n)
		opts := DefaultOptions()
		if i%5 == 0 {
			opts.RuntimeCostLimit = uint64(100 + r.IntN(400))
		}
		base := mustCompile(t, p, opts)
		other := mustCompile(t, mutate(r, p), opts) // a stale live version
		for v := range variants {
			q := mutate(r, p)
			if v == 0 {
				q = p // an experiment identical to live
			}
			eopts := opts
			if v == 3 && i%2 == 0 {
				eopts.RuntimeCostLimit = opts.RuntimeCostLimit + 1
			}
			exp := mustCompile(t, q, eopts)
			d := NewDelta(exp, base)
			for range requests {
				req := genRequest(r)
				want := exp.Evaluate(req)
				live := base.Evaluate(req)
				if got := d.Evaluate(req, live); got != want {
					t.Fatalf("policy %d variant %d, request %+v, live %+v:\ndelta %+v\nfull  %+v\nlive rules:\n%s\nexperiment rules:\n%s",
						i, v, req, live, got, want, ruleDump(p), ruleDump(q))
				}
				if d.shortcut(live) {
					shortcuts++
				}
				if got := d.Evaluate(req, other.Evaluate(req)); got != want {
					t.Fatalf("policy %d variant %d: from a stale live decision: %+v, want %+v", i, v, got, want)
				}
			}
		}
	}
	t.Logf("%d of %d evaluations took the shortcut", shortcuts, policies*variants*requests)
	// The equivalence would hold trivially if every call fell back.
	if total := policies * variants * requests; shortcuts < total/2 {
		t.Errorf("only %d of %d evaluations took the shortcut", shortcuts, total)
	}
}

// shortcut reports whether Evaluate would use live rather than fall back.
func (d *Delta) shortcut(live Decision) bool {
	w := walk{s: d.set, p: d.set.basePosition(live)}
	return w.stop(0) >= 0
}

// changedRules are the names of the experiment's rules without a twin.
func (d *Delta) changedRules() []string {
	var names []string
	for _, m := range d.set.union {
		names = append(names, d.set.exps[0].cp.rules[m.pos].name)
	}
	return names
}

// hasTwin reports whether base rule name has a twin in the experiment.
func (d *Delta) hasTwin(name string) bool {
	p, ok := d.set.basePos[name]
	return ok && d.set.stops[p].pos >= 0
}

// TestDeltaChangedRules: the rules evaluated from a live decision are the
// experiment's changed and added ones; a changed description does not
// count, a moved priority does.
func TestDeltaChangedRules(t *testing.T) {
	live := &policy.Policy{Name: "p", DefaultAction: policy.ActionAllow, Rules: []policy.Rule{
		{Name: "a", Priority: 1, Action: policy.ActionDeny, Match: `request.method == "DELETE"`},
		{Name: "b", Priority: 2, Action: policy.ActionDeny, Match: `request.path.startsWith("/admin")`},
		{Name: "c", Priority: 3, Action: policy.ActionAllow, Match: `request.host == "x"`},
		{Name: "d", Priority: 4, Action: policy.ActionDeny, Match: `request.host == "y"`},
	}}
	exp := *live
	exp.Rules = slices.Clone(live.Rules)
	exp.Rules[0].Description = "documented"                                                                      // same rule
	exp.Rules[1].Action = policy.ActionAllow                                                                     // changed
	exp.Rules[3].Priority = 0                                                                                    // moved first
	exp.Rules = append(exp.Rules, policy.Rule{Name: "e", Priority: 5, Action: policy.ActionDeny, Match: `true`}) // added
	base, e := mustCompile(t, live, DefaultOptions()), mustCompile(t, &exp, DefaultOptions())
	d := NewDelta(e, base)
	if changed, want := d.changedRules(), []string{"d", "b", "e"}; !slices.Equal(changed, want) {
		t.Errorf("changed rules %v, want %v", changed, want)
	}
	for name, want := range map[string]bool{"a": true, "b": false, "c": true, "d": false} {
		if got := d.hasTwin(name); got != want {
			t.Errorf("rule %s has a twin: %v, want %v", name, got, want)
		}
	}
	// host x: live decides with c; the experiment evaluates only d (its
	// position 0) before c's twin, then c decides.
	req := &Request{Method: "GET", Path: "/", Host: "x"}
	liveDec := base.Evaluate(req)
	if liveDec.Rule != "c" || !d.shortcut(liveDec) {
		t.Fatalf("live decision %+v, shortcut %v", liveDec, d.shortcut(liveDec))
	}
	if got, want := d.Evaluate(req, liveDec), e.Evaluate(req); got != want || got.Rule != "c" {
		t.Errorf("delta %+v, full %+v", got, want)
	}
}

// BenchmarkDelta compares evaluating an experiment from scratch with
// evaluating it from the live decision, on the 100-rule firewall policy
// with one rule's action flipped and one rule added before all others
// (the usual shape of a change under review): "indexed" as it is, where
// the index alone decides nearly every rule, and "cel" with a conjunct the
// index cannot use added to every rule, so that candidates need CEL.
func BenchmarkDelta(b *testing.B) {
	b.Run("indexed", func(b *testing.B) { benchDelta(b, firewallPolicy(100, 42)) })
	p := firewallPolicy(100, 42)
	for i := range p.Rules {
		p.Rules[i].Match += ` && !request.path.contains("..")`
	}
	b.Run("cel", func(b *testing.B) { benchDelta(b, p) })
}

func benchDelta(b *testing.B, p *policy.Policy) {
	q := *p
	q.Rules = slices.Clone(p.Rules)
	q.Rules[40].Action = map[policy.Action]policy.Action{policy.ActionAllow: policy.ActionDeny, policy.ActionDeny: policy.ActionAllow}[q.Rules[40].Action]
	q.Rules = append(q.Rules, policy.Rule{Name: "added", Priority: -1, Action: policy.ActionDeny, Match: `request.path == "/blocked"`})
	live, exp := mustCompile(b, p, DefaultOptions()), mustCompile(b, &q, DefaultOptions())
	d := NewDelta(exp, live)
	reqs := fwRequests(1024, 7)
	decisions := make([]Decision, len(reqs))
	for i, r := range reqs {
		decisions[i] = live.Evaluate(r)
	}
	b.Run("full", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			exp.Evaluate(reqs[i&1023])
		}
	})
	b.Run("delta", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			d.Evaluate(reqs[i&1023], decisions[i&1023])
		}
	})
}

// BenchmarkDeltaExample is BenchmarkDelta on the example policies and
// their sample traffic: each policy with its middle rule's action flipped.
func BenchmarkDeltaExample(b *testing.B) {
	repo, err := policy.Load(os.DirFS("../../policies.example"), policy.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	reqs := sampleTraffic(b)
	for _, p := range repo.Policies {
		q := *p
		q.Rules = slices.Clone(p.Rules)
		m := &q.Rules[len(q.Rules)/2]
		m.Action = map[policy.Action]policy.Action{policy.ActionAllow: policy.ActionDeny, policy.ActionDeny: policy.ActionAllow}[m.Action]
		live, exp := mustCompile(b, p, DefaultOptions()), mustCompile(b, &q, DefaultOptions())
		d := NewDelta(exp, live)
		decisions := make([]Decision, len(reqs))
		for i, r := range reqs {
			decisions[i] = live.Evaluate(r)
		}
		b.Run(p.Name+"/full", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				exp.Evaluate(reqs[i%len(reqs)])
			}
		})
		b.Run(p.Name+"/delta", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				d.Evaluate(reqs[i%len(reqs)], decisions[i%len(reqs)])
			}
		})
	}
}

// sampleTraffic is the example policies' sample traffic.
func sampleTraffic(tb testing.TB) []*Request {
	data, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	var reqs []*Request
	for line := range strings.Lines(string(data)) {
		var r Request
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			tb.Fatal(err)
		}
		reqs = append(reqs, &r)
	}
	return reqs
}
