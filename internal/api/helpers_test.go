package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
)

// fakeGenerations is a hand-written api.Generations.
type fakeGenerations struct {
	mu   sync.Mutex
	byN  map[uint64]*Snapshot
	curN uint64
}

func (g *fakeGenerations) Current() *Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byN[g.curN]
}

func (g *fakeGenerations) Get(n uint64) *Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byN[n]
}

func (g *fakeGenerations) set(s *Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byN == nil {
		g.byN = map[uint64]*Snapshot{}
	}
	g.byN[s.Generation] = s
	g.curN = s.Generation
}

// mirrorFunc adapts a function to Mirror.
type mirrorFunc func(snap *Snapshot, policy string, req *engine.Request)

func (f mirrorFunc) Mirror(snap *Snapshot, policy string, req *engine.Request) { f(snap, policy, req) }

// testBundle compiles the policies under testdata/policies.
func testBundle(t testing.TB) *engine.Bundle {
	t.Helper()
	repo, err := policy.Load(os.DirFS("testdata/policies"), policy.LoadOptions{MergeDefault: policy.StrategyFail})
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.NewBundle(repo.Policies, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixedNow is the receipt time of test servers: past the "future" rule.
func fixedNow() time.Time { return time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC) }

type testEnv struct {
	t    *testing.T
	gens *fakeGenerations
	srv  *Server
	http *httptest.Server
}

// newTestEnv starts a real HTTP server with generation 7 loaded.
func newTestEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 7, Commit: "abc123", Bundle: testBundle(t)})
	if cfg.Generations == nil {
		cfg.Generations = gens
	}
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t)
	}
	if cfg.TrustedProxies == nil {
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	srv := New(cfg)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &testEnv{t: t, gens: gens, srv: srv, http: hs}
}

type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", a.body, err)
	}
	return m
}

// do sends one request and reads the whole answer.
func (e *testEnv) do(method, path string, body io.Reader, header map[string]string) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if isWrite(method) {
		// What every client of the API sends with a write; a test
		// that means to send another type says so in header.
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: b}
}

func (e *testEnv) post(path, body string) answer {
	e.t.Helper()
	return e.do(http.MethodPost, path, strings.NewReader(body), nil)
}

// wantError checks an AIP-193 error answer.
func wantError(t *testing.T, a answer, code int, status string) {
	t.Helper()
	if a.code != code {
		t.Fatalf("code = %d, want %d; body %s", a.code, code, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
				Domain string `json:"domain"`
			} `json:"details"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("error body %q is not AIP-193: %v", a.body, err)
	}
	if body.Error.Code != code || body.Error.Status != status || body.Error.Message == "" {
		t.Errorf("error = %+v, want code %d status %s and a message", body.Error, code, status)
	}
	if strings.Contains(string(a.body), "goroutine") || strings.Contains(string(a.body), ".go:") {
		t.Errorf("error body leaks internals: %s", a.body)
	}
}

// httpRecord runs one request through h without a network.
func httpRecord(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}
