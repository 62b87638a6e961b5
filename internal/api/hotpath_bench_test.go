package api

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// BenchmarkEvaluateHotPath runs the whole :evaluate handler in-process
// over the 2,500 requests of policies.example/_traffic, one per iteration
// in turn, with preview running as on a node (no experiment, the replay
// recorder on): everything the node does for a decision but net/http's
// own work. allocs/op and cpu-ns/op (getrusage, every goroutine of the
// process, so the preview worker and the collector are counted) are its
// measure; scripts/bench-http.sh measures the same path over HTTP.
func BenchmarkEvaluateHotPath(b *testing.B) {
	files, err := policy.ReadTree(os.DirFS("../../policies.example"))
	if err != nil {
		b.Fatal(err)
	}
	bundle, errs := engine.CompileTree(files, policy.LoadOptions{}, engine.DefaultOptions())
	if errs != nil {
		b.Fatal(errs)
	}
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 1, Bundle: bundle})
	sh := preview.New(preview.Config{Node: "bench"})
	if err := sh.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sh.Stop(context.Background()) }()
	s := New(Config{Generations: gens, Preview: sh})

	samples, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(samples), []byte("\n"))
	reqs := make([]*http.Request, len(lines))
	bodies := make([]*bytes.Reader, len(lines))
	for i, l := range lines {
		bodies[i] = bytes.NewReader(l)
		reqs[i], err = http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/policies/edge-firewall:evaluate", bodies[i])
		if err != nil {
			b.Fatal(err)
		}
		reqs[i].RemoteAddr = "127.0.0.1:40000"
		reqs[i].Header.Set("Content-Type", "application/json")
	}
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	c0, i := benchCPU(), 0
	for b.Loop() {
		k := i % len(reqs)
		bodies[k].Seek(0, 0)
		w.reset()
		s.ServeHTTP(w, reqs[k])
		if w.code != http.StatusOK {
			b.Fatalf("sample %d: status %d: %s", k+1, w.code, w.body.Bytes())
		}
		i++
	}
	b.ReportMetric(float64(benchCPU()-c0)/float64(i), "cpu-ns/op")
}

// benchWriter is a reusable http.ResponseWriter: the benchmark measures
// the handler, not httptest's recorder.
type benchWriter struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(p)
}
func (w *benchWriter) reset() { clear(w.h); w.code = 0; w.body.Reset() }

// benchCPU is the CPU time the process has used, user and system.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
