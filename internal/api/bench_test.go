package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// benchBody is a realistic decision request; it is decided by rule 60 of
// the benchmark policy, after the rules before it do not match.
const benchBody = `{"method":"GET","path":"/svc60/items/42","host":"shop.example","scheme":"https",` +
	`"query":{"page":"2","lang":"en"},"headers":{"user-agent":"bench/1.0","accept":"application/json","x-tenant":"acme"},` +
	`"source_ip":"192.0.2.10","principal":"alice@example.com","groups":["staff","eu"]}`

// benchPolicyTOML returns a 100-rule policy in the shapes real policies
// use: path prefixes with methods, tenant headers, address ranges, groups
// and an occasional regex.
func benchPolicyTOML() string {
	var b strings.Builder
	b.WriteString("default_action = \"deny\"\non_error = \"skip\"\n")
	for i := range 100 {
		var match, action string
		switch i % 4 {
		case 0:
			match, action = fmt.Sprintf(`request.path.startsWith("/svc%d/") && request.method in ["GET", "HEAD"]`, i), "allow"
		case 1:
			match, action = fmt.Sprintf(`"x-tenant" in request.headers && request.headers["x-tenant"] == "tenant-%d" && request.method != "GET"`, i), "deny"
		case 2:
			match, action = fmt.Sprintf(`inIpRange(request.source_ip, "10.%d.0.0/16") && request.path.startsWith("/internal/")`, i), "allow"
		case 3:
			match, action = fmt.Sprintf(`"team-%d" in request.groups && request.path.matches("^/teams/%d/[a-z]+$")`, i, i), "allow"
		}
		fmt.Fprintf(&b, "\n[[rules]]\nname = \"rule-%03d\"\npriority = %d\naction = %q\nmatch = '%s'\n", i, 10*i, action, match)
	}
	return b.String()
}

func benchServer(tb testing.TB) *Server {
	tb.Helper()
	p, err := policy.MergeFiles([]policy.SourceFile{{Name: "bench/policy.toml", Data: []byte(benchPolicyTOML())}},
		policy.LoadOptions{MergeDefault: policy.StrategyFail})
	if err != nil {
		tb.Fatal(err)
	}
	bundle, err := engine.NewBundle([]*policy.Policy{p}, engine.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 1, Bundle: bundle})
	return New(Config{Generations: gens})
}

// trivialHandler is the baseline: decode a small JSON body and write a
// JSON answer, as the simplest Go JSON service would.
func trivialHandler() http.Handler {
	type in struct {
		Method string `json:"method"`
		Path   string `json:"path"`
	}
	type out struct {
		Decision string `json:"decision"`
		Path     string `json:"path"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v in
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out{Decision: "ALLOW", Path: v.Path})
	})
}

// loopbackReqPerSec serves h on a real loopback listener and returns the
// requests per second that parallel keep-alive clients get.
func loopbackReqPerSec(b *testing.B, h http.Handler, url, body string) float64 {
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	defer client.CloseIdleConnections()
	payload := []byte(body)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL+url, "application/json", bytes.NewReader(payload))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	rps := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(rps, "req/s")
	return rps
}

// BenchmarkHTTP measures each server alone, for benchstat.
func BenchmarkHTTP(b *testing.B) {
	s := benchServer(b)
	b.Run("trivial", func(b *testing.B) { loopbackReqPerSec(b, trivialHandler(), "/", benchBody) })
	b.Run("evaluate", func(b *testing.B) { loopbackReqPerSec(b, s, "/v1/policies/bench:evaluate", benchBody) })
}

// BenchmarkEvaluateVsTrivial runs the two servers in alternating rounds on
// the same machine in the same run and reports both rates (medians) and
// evaluate/trivial: the cost of a real decision over the cheapest possible
// JSON service. Alternating rounds keep background load from favouring one.
func BenchmarkEvaluateVsTrivial(b *testing.B) {
	s := benchServer(b)
	const rounds = 3
	var triv, eval []float64
	for range rounds {
		triv = append(triv, runRate(func(b *testing.B) { loopbackReqPerSec(b, trivialHandler(), "/", benchBody) }))
		eval = append(eval, runRate(func(b *testing.B) { loopbackReqPerSec(b, s, "/v1/policies/bench:evaluate", benchBody) }))
	}
	t, e := median(triv), median(eval)
	b.ReportMetric(t, "trivial-req/s")
	b.ReportMetric(e, "evaluate-req/s")
	b.ReportMetric(e/t, "ratio")
	// The outer loop does no work of its own; its ns/op is meaningless.
	for range b.N {
	}
}

func runRate(f func(b *testing.B)) float64 {
	r := testing.Benchmark(f)
	return r.Extra["req/s"]
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func TestBenchPolicyDecides(t *testing.T) {
	s := benchServer(t)
	rec := httpRecord(s, "POST", "/v1/policies/bench:evaluate", benchBody)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"rule":"rule-060"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}
