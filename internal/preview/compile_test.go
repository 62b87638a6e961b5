package preview_test

import (
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// TestCompilerKeysByLiveVersion: an experiment's program is reused while
// its version and its live policy's stay the same, and compiled again
// when the live policy changes, so that it shares the new live programs
// rather than keeping the old ones alive; it decides the same either way.
func TestCompilerKeysByLiveVersion(t *testing.T) {
	comp := preview.NewCompiler(engine.Options{})
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	live := map[string]*engine.CompiledPolicy{"web": compile(t, webPolicy())}

	first, errs := comp.CompileAll([]*preview.Experiment{e}, live)
	if len(errs) > 0 || len(first) != 1 {
		t.Fatalf("CompileAll: %v, %d compiled", errs, len(first))
	}
	again, _ := comp.CompileAll([]*preview.Experiment{e}, live)
	if again[0].Program != first[0].Program {
		t.Fatal("the same versions were compiled again")
	}

	changed := webPolicy()
	changed.Rules = append(changed.Rules, policy.Rule{Name: "deny-trace", Priority: 10, Action: policy.ActionDeny,
		Match: "request.method == 'TRACE'"})
	next := map[string]*engine.CompiledPolicy{"web": compile(t, changed)}
	after, _ := comp.CompileAll([]*preview.Experiment{e}, next)
	if after[0].Program == first[0].Program {
		t.Fatal("a new live version kept the program compiled beside the old one")
	}
	for _, req := range []*engine.Request{
		{Method: "GET", Scheme: "http", Path: "/", SourceIP: "203.0.113.9"},
		{Method: "GET", Scheme: "https", Path: "/admin", SourceIP: "192.0.2.1"},
	} {
		alone := compile(t, e.Policy).Evaluate(req)
		for _, ce := range []preview.CompiledExperiment{first[0], after[0]} {
			if got := ce.Program.Evaluate(req); got != alone {
				t.Fatalf("request %+v: %+v, compiled alone %+v", req, got, alone)
			}
		}
	}
	if _, errs := comp.CompileAll([]*preview.Experiment{e}, nil); len(errs) > 0 {
		t.Fatalf("without a live policy (a new policy previewed): %v", errs)
	}
}
