package preview_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// heavyWeb is the live web policy with n more rules of twelve prefix
// tests, distinct for each tag: what a heavy experiment adds to a node.
func heavyWeb(tag string, n int) *policy.Policy {
	p := webPolicy()
	for r := range n {
		terms := make([]string, 12)
		for k := range terms {
			terms[k] = fmt.Sprintf("request.path.startsWith('/%s/r%d/x%d')", tag, r, k)
		}
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("%s-%d", tag, r), Priority: int64(1000 + r),
			Action: policy.ActionDeny, Match: strings.Join(terms, " || ")})
	}
	return p
}

// programOf is e's program in out.
func programOf(out []preview.CompiledExperiment, e *preview.Experiment) *engine.CompiledPolicy {
	for _, ce := range out {
		if ce.Experiment.Name == e.Name {
			return ce.Program
		}
	}
	return nil
}

// Issue 22, finding 5: a fork's pull request held until a writer approves
// it (its experiment never started, or stopped) costs a node nothing: it
// is not compiled until it is ACTIVE.
func TestHeldExperimentIsNotCompiled(t *testing.T) {
	comp := preview.NewCompiler(engine.Options{})
	live := map[string]*engine.CompiledPolicy{"web": compile(t, webPolicy())}
	held := create(t, nil, "held", heavyWeb("held", 50))
	stopped, err := preview.StopPreview(start(t, create(t, nil, "stopped", heavyWeb("stopped", 50)), at(1)), at(2))
	if err != nil {
		t.Fatal(err)
	}
	out, errs := comp.CompileAll([]*preview.Experiment{held, stopped}, live)
	if len(errs) > 0 || len(out) != 2 {
		t.Fatalf("CompileAll: %v, %d out", errs, len(out))
	}
	for _, ce := range out {
		if ce.Program != nil {
			t.Errorf("%s (%v) was compiled before it was started", ce.Experiment.Name, ce.Experiment.PreviewMetadata)
		}
	}
	if u := comp.Usage(); u.Programs != 0 || u.Compiles != 0 || u.Bytes != 0 {
		t.Fatalf("held experiments hold %+v", u)
	}

	approved := start(t, held, at(3))
	out, errs = comp.CompileAll([]*preview.Experiment{approved, stopped}, live)
	if len(errs) > 0 || programOf(out, approved) == nil || programOf(out, stopped) != nil {
		t.Fatalf("after the approval: %v, %+v", errs, out)
	}
	u := comp.Usage()
	t.Logf("one heavy experiment started: %+v", u)
	if u.Programs != 1 || u.Compiles != 1 || u.Size.ExprNodes < 50*12*4 {
		t.Fatalf("after the approval the compiler holds %+v", u)
	}
}

// Issue 22, finding 5: a node with many heavy experiments refuses the one
// that would cross its budget, naming the budget in the experiment's
// stats and in its pull request summary; it keeps serving, the earlier
// experiments keep previewing, and the refused one previews once another
// stops and leaves room.
func TestNodeBudgetRefusesTheOneOver(t *testing.T) {
	h := newHarness(t, preview.Config{Node: "n1", RecordRequests: -1}, webPolicy())
	perExp := engine.Size{ExprNodes: 60 * 59}.Bytes() // 59 nodes a rule of twelve prefix tests
	h.comp.WithBudget(perExp*2 + perExp/2)            // room for two
	var exps []*preview.Experiment
	for i, tag := range []string{"a", "b", "c"} {
		p := heavyWeb(tag, 60)
		p.Rules = append(p.Rules, policy.Rule{Name: "deny-" + tag, Priority: 1, Action: policy.ActionDeny,
			Match: fmt.Sprintf("request.path == '/only-%s'", tag)})
		exps = append(exps, start(t, create(t, exps, "exp-"+tag, p), at(i)))
	}
	install := func(exps ...*preview.Experiment) map[string]error {
		out, errs := h.comp.CompileAll(exps, h.live)
		h.sh.SetExperiments(h.live, out)
		return errs
	}
	errs := install(exps...)
	if len(errs) != 1 || errs[exps[2].Name] == nil {
		t.Fatalf("want exp-c refused: %v", errs)
	}
	h.offer("web", req("GET", "https", "/only-a", "203.0.113.1"), req("GET", "https", "/only-c", "203.0.113.1"))
	for i, e := range exps {
		s := h.stats(e)
		t.Logf("%s: evaluated %d, refused %q", e.Name, s.Evaluated, s.Refused)
		if refused := i == 2; refused != (s.Refused != "") || refused != (s.Evaluated == 0) {
			t.Fatalf("%s: evaluated %d, refused %q", e.Name, s.Evaluated, s.Refused)
		}
	}
	if d := h.live["web"].Evaluate(req("GET", "https", "/", "203.0.113.1")); d.Verdict != engine.Allow {
		t.Fatalf("the live policy answers %+v", d)
	}
	merged := preview.Merge(h.sh.NodeStats())
	sum := preview.Summarize(exps[2], h.live["web"].Etag(), merged, preview.Thresholds{})
	for _, want := range []string{"on n1: ", "preview.max_compiled_bytes = ", "stop or delete an experiment"} {
		if !strings.Contains(sum.NotPreviewed, want) {
			t.Fatalf("the summary's reason %q does not say %q", sum.NotPreviewed, want)
		}
	}
	if v := preview.ViewOf(exps[2], merged); v.Stats == nil || v.Stats.Refused != sum.NotPreviewed {
		t.Fatalf("the API view does not show the refusal: %+v", v.Stats)
	}

	// The state read again: nothing is parsed again, exp-c still refused.
	measured := h.comp.Usage().Measured
	if errs := install(exps...); len(errs) != 1 || h.comp.Usage().Measured != measured {
		t.Fatalf("read again: %v, measured %d then %d", errs, measured, h.comp.Usage().Measured)
	}

	// exp-a stops: exp-c fits and previews.
	stopped, err := preview.StopPreview(exps[0], at(5))
	if err != nil {
		t.Fatal(err)
	}
	if errs := install(stopped, exps[1], exps[2]); len(errs) != 0 {
		t.Fatalf("after exp-a stopped: %v", errs)
	}
	h.offer("web", req("GET", "https", "/only-c", "203.0.113.1"))
	if s := h.stats(exps[2]); s.Evaluated == 0 || s.Refused != "" {
		t.Fatalf("exp-c after exp-a stopped: evaluated %d, refused %q", s.Evaluated, s.Refused)
	}
}
