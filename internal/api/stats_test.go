package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDecisionStatsCountErrors: a decision that hit a run-time error
// counts as failed, the others as successes.
func TestDecisionStatsCountErrors(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.post("/v1/policies/web:evaluate", `{"method":"GET","path":"/admin/x","attributes":{"tier":"gold"}}`)
	e.post("/v1/policies/web:evaluate", `{"path":"/gold"}`) // on_error deny carries the error
	e.do(http.MethodGet, "/v1/policies/web:authorize/x", nil, nil)
	if ok, failed := e.srv.DecisionStats(); ok != 2 || failed != 1 {
		t.Fatalf("stats = %d ok, %d failed; want 2, 1", ok, failed)
	}
}

// BenchmarkEvaluateStatistics measures :evaluate in process with the
// decision statistics and without them, interleaved in one run (with,
// without, without, with) so that machine noise hits both alike. Compare
// the ns/op of the two: the target is a ratio of at least 0.98.
func BenchmarkEvaluateStatistics(b *testing.B) {
	s := benchServer(b)
	for _, name := range []string{"with", "without", "without", "with"} {
		b.Run(name, func(b *testing.B) {
			if name == "with" {
				s.dec.stats = &decisionStats{}
			} else {
				s.dec.stats = nil
			}
			r := httptest.NewRequest(http.MethodPost, "/v1/policies/bench:evaluate", nil)
			body := strings.NewReader(benchBody)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				body.Reset(benchBody)
				r.Body = readCloser{body}
				w.code = 0
				s.ServeHTTP(w, r)
			}
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
		})
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// discardWriter is a ResponseWriter that keeps the status only.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
