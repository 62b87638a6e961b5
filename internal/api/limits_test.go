package api

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// manyHeaders is n headers whose values an error must not echo.
func manyHeaders(n int) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h["X-Pad-"+strconv.Itoa(i)] = "secret-" + strconv.Itoa(i)
	}
	return h
}

// jsonHeaders is an :evaluate body with n headers.
func jsonHeaders(n int) string {
	var b strings.Builder
	b.WriteString(`{"method":"GET","path":"/healthz","headers":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"x-pad-` + strconv.Itoa(i) + `":"secret-` + strconv.Itoa(i) + `"`)
	}
	return b.String() + `}}`
}

// TestDecisionHeaderCap (issue 22, finding 6): every decision form
// decoded any number of headers (50,000 in a 0.74 MB body cost 8.5 MB in
// flight). Past [api] max_request_headers (default 128) the JSON
// forms answer 400 INVALID_ARGUMENT and :authorize denies with an
// INVALID_ARGUMENT reason, as for any malformed check; no answer echoes a
// header value.
func TestDecisionHeaderCap(t *testing.T) {
	mirrored := &mirrorRecorder{}
	e := newTestEnv(t, Config{Now: fixedNow, Mirror: mirrored})
	noSecret := func(a answer) {
		t.Helper()
		if strings.Contains(string(a.body), "secret-") || strings.Contains(a.header.Get("X-Policy-Error"), "secret-") {
			t.Errorf("the answer echoes a header value: %v %s", a.header, a.body)
		}
	}

	a := e.post("/v1/policies/web:evaluate", jsonHeaders(engine.DefaultMaxHeaders+1))
	wantError(t, a, http.StatusBadRequest, "INVALID_ARGUMENT")
	if !strings.Contains(string(a.body), "more than "+strconv.Itoa(engine.DefaultMaxHeaders)+" headers") {
		t.Errorf(":evaluate body %s does not say why", a.body)
	}
	noSecret(a)
	if a := e.post("/v1/policies/web:evaluate", jsonHeaders(engine.DefaultMaxHeaders)); a.code != http.StatusOK {
		t.Errorf(":evaluate with %d headers: %d %s", engine.DefaultMaxHeaders, a.code, a.body)
	}

	a = e.do(http.MethodGet, "/v1/policies/web:authorize/healthz", nil, manyHeaders(engine.DefaultMaxHeaders+1))
	if a.code != http.StatusForbidden || a.header.Get("X-Policy-Decision") != "DENY" ||
		!strings.HasPrefix(a.header.Get("X-Policy-Error"), "INVALID_ARGUMENT: the request has") {
		t.Errorf(":authorize over the cap: %d %v", a.code, a.header)
	}
	noSecret(a)
	if a := e.do(http.MethodGet, "/v1/policies/web:authorize/healthz", nil, manyHeaders(90)); a.code != http.StatusOK {
		t.Errorf(":authorize with 90 headers: %d %v", a.code, a.header)
	}

	a = e.do(http.MethodGet, "/v1/policies/web:mirror/healthz", nil, manyHeaders(engine.DefaultMaxHeaders+1))
	wantError(t, a, http.StatusBadRequest, "INVALID_ARGUMENT")
	noSecret(a)
	a = e.post("/v1/policies/web:mirror", jsonHeaders(engine.DefaultMaxHeaders+1))
	wantError(t, a, http.StatusBadRequest, "INVALID_ARGUMENT")
	if got := mirrored.take(); len(got) != 0 {
		t.Errorf("%d requests over the cap were mirrored", len(got))
	}

	wide := newTestEnv(t, Config{Now: fixedNow, MaxRequestHeaders: 200})
	if a := wide.post("/v1/policies/web:evaluate", jsonHeaders(150)); a.code != http.StatusOK {
		t.Errorf("max_request_headers 200, 150 headers: %d %s", a.code, a.body)
	}
	a = wide.post("/v1/policies/web:evaluate", jsonHeaders(201))
	wantError(t, a, http.StatusBadRequest, "INVALID_ARGUMENT")
}

// waitFor polls cond for up to 10 s: an outcome, not a timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestDecisionsInFlightCap (issue 22, finding 6): any number of decisions
// were worked on at once (200 large bodies took a node to 1.76 GB). Past
// [api] max_decisions_in_flight every form answers 503 UNAVAILABLE with
// Retry-After, counted by form and reason, and answers again once a slot
// is free.
func TestDecisionsInFlightCap(t *testing.T) {
	e := newTestEnv(t, Config{Now: fixedNow, MaxDecisionsInFlight: 2})
	// Two decisions being decoded and evaluated: a slot is taken only
	// once a body is in, so the test takes them as a decision does.
	for range 2 {
		if !e.srv.AdmitDecision(FormEvaluate) {
			t.Fatal("a free slot was refused")
		}
	}
	shed := func(a answer, what string) {
		t.Helper()
		wantError(t, a, http.StatusServiceUnavailable, "UNAVAILABLE")
		if a.header.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q", what, a.header.Get("Retry-After"))
		}
	}
	shed(e.post("/v1/policies/web:evaluate", `{"path":"/healthz"}`), ":evaluate")
	shed(e.post("/v1/generations/7/policies/web:evaluate", `{"path":"/healthz"}`), "pinned :evaluate")
	shed(e.do(http.MethodGet, "/v1/policies/web:authorize/healthz", nil, nil), ":authorize")
	shed(e.do(http.MethodGet, "/v1/generations/7/policies/web:authorize/healthz", nil, nil), "pinned :authorize")
	shed(e.do(http.MethodGet, "/v1/policies/web:mirror/healthz", nil, nil), ":mirror")
	shed(e.post("/v1/policies/web:mirror", `{"path":"/healthz"}`), "JSON :mirror")
	metrics := string(e.do(http.MethodGet, "/metrics", nil, nil).body)
	for _, line := range []string{`reconciler_decisions_shed_total{form="evaluate",reason="in_flight"} 2`,
		`reconciler_decisions_shed_total{form="authorize",reason="in_flight"} 2`,
		`reconciler_decisions_shed_total{form="mirror",reason="in_flight"} 2`, `reconciler_decisions_shed_total{form="check",reason="in_flight"} 0`,
		"reconciler_decisions_in_flight 2", "reconciler_decision_body_bytes 0"} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	e.srv.DoneDecision()
	e.srv.DoneDecision()
	if a := e.post("/v1/policies/web:evaluate", `{"path":"/healthz"}`); a.code != http.StatusOK {
		t.Errorf("after the held ones: %d %s", a.code, a.body)
	}
	if a := e.do(http.MethodGet, "/v1/policies/web:authorize/healthz", nil, nil); a.code != http.StatusOK {
		t.Errorf(":authorize after the held ones: %d %v", a.code, a.header)
	}
}

// TestDecisionsInFlightDefault: without configuration the bound holds.
func TestDecisionsInFlightDefault(t *testing.T) {
	e := newTestEnv(t, Config{})
	if got := e.srv.MaxDecisionsInFlight(); got != DefaultMaxDecisionsInFlight {
		t.Fatalf("MaxDecisionsInFlight() = %d, want %d", got, DefaultMaxDecisionsInFlight)
	}
}
