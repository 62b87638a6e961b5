package preview_test

import (
	"fmt"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// BenchmarkPreviewRules measures a live decision (ns/op) and all the CPU
// a request costs (cpu-ns/op: the decision, the offer and the shadow
// workers' evaluation of the rules in preview) on the 100-rule policy
// with 0 and 10 rules in preview. The live decision of both is the same
// program: the engine leaves rules in preview out.
//
//	go test -run '^$' -bench BenchmarkPreviewRules -count 5 ./internal/preview/
func BenchmarkPreviewRules(b *testing.B) {
	for _, n := range []int{0, 10} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			p := hundredRules(-1)
			for i := range n {
				p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("pv%d", i), Priority: int64(10 + i),
					Action: policy.ActionDeny, Match: fmt.Sprintf("request.path.startsWith('/p%d/')", 10*i), Preview: true})
			}
			live := map[string]*engine.CompiledPolicy{"bench": compile(b, p)}
			sh := preview.New(preview.Config{Workers: 1, Log: discard{}, RecordRequests: -1})
			compiled, errs := preview.NewCompiler(engine.Options{}).CompileAll(preview.PreviewRules(live, 0), live)
			if len(errs) > 0 || len(compiled) != n {
				b.Fatalf("compiled %d, errors %v", len(compiled), errs)
			}
			sh.SetExperiments(live, compiled)
			if err := sh.Start(b.Context()); err != nil {
				b.Fatal(err)
			}
			defer sh.Stop(b.Context())
			reqs := benchRequests(1024)
			const chunk = 1000
			cpu := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; {
				for end := min(b.N, i+chunk); i < end; i++ {
					r := reqs[i&1023]
					sh.Offer("bench", live["bench"].Evaluate(r), r)
				}
				drain(sh)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(sh.Status().Dropped)/float64(b.N), "dropped/op")
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
