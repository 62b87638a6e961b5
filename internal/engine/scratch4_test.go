package engine

import (
	"testing"

	"cel.dev/cel-go/cel"
)

func BenchmarkScratchEval(b *testing.B) {
	env, _ := celEnv()
	req := &Request{Method: "GET", Principal: "x", Headers: map[string]string{"user-agent": "bench", "x-tenant": "t1"}}
	for _, src := range []string{
		`request.headers['user-agent'] == 'bot-1' || request.principal == 'user-1'`,
		`request.principal == 'user-1'`,
		`request.method == 'GET'`,
	} {
		a, _ := env.Compile(src)
		p1, _ := env.Program(a, cel.CostLimit(1000000), cel.EvalOptions(cel.OptOptimize))
		p2, _ := env.Program(a, cel.EvalOptions(cel.OptOptimize))
		act := (*activation)(req)
		b.Run("tracked/"+src, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p1.Eval(act)
			}
		})
		b.Run("untracked/"+src, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p2.Eval(act)
			}
		})
		b.Run("map/"+src, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p2.Eval(map[string]any{"request": req})
			}
		})
	}
}
