package api

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
)

// previewingFake is a Preview whose ACTIVE experiments are on the listed
// policies; it records what it is offered.
type previewingFake struct {
	policies map[string]bool
	mu       sync.Mutex
	offered  []string
}

func (p *previewingFake) Offer(policy string, _ engine.Decision, _ *engine.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offered = append(p.offered, policy)
}

func (p *previewingFake) takeOffered() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.offered
	p.offered = nil
	return out
}
func (p *previewingFake) Previewing(policy string) bool { return p.policies[policy] }
func (p *previewingFake) Stats() []preview.Stats        { return nil }
func (p *previewingFake) Status() preview.Status        { return preview.Status{} }

// TestNewPolicyShadow: a policy that exists only in an experiment sees
// :evaluate and :authorize traffic (as mirrored requests, compared with an
// allow-all live policy), while the live answer stays that of an unknown
// policy.
func TestNewPolicyShadow(t *testing.T) {
	rec := &mirrorRecorder{}
	pv := &previewingFake{policies: map[string]bool{"fresh": true}}
	e := newTestEnv(t, Config{Now: fixedNow, Mirror: rec, Preview: pv})

	wantError(t, e.post("/v1/policies/fresh:evaluate", `{"method":"PUT","path":"/e"}`), 404, "NOT_FOUND")
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/fresh:authorize", nil, map[string]string{"X-Original-URI": "/a?x=1"}), 403, "NOT_FOUND: ")
	got := rec.wait(t, 2)
	if len(got) != 2 || got[0].Method != "PUT" || got[0].Path != "/e" || got[1].Path != "/a" || got[1].Query.Map()["x"] != "1" {
		t.Fatalf("experiments saw %+v, want the :evaluate and the :authorize request", got)
	}
	if o := pv.takeOffered(); len(o) != 0 {
		t.Errorf("offered as live decisions: %v", o)
	}

	// Refused requests, policies nobody previews and pinned checks are not shadowed.
	wantError(t, e.post("/v1/policies/fresh:evaluate", `{"bogus":1}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/policies/other:evaluate", `{}`), 404, "NOT_FOUND")
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/other:authorize/x", nil, nil), 403, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/generations/7/policies/fresh:authorize/x", nil, nil), 403, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/fresh:authorize", nil, map[string]string{"X-Original-URI": "::bad"}), 403, "NOT_FOUND: ")
	// A shadowed request last: once it arrived, nothing else may have.
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/fresh:authorize/last", nil, nil), 403, "NOT_FOUND: ")
	if got := rec.wait(t, 1); len(got) != 1 || got[0].Path != "/last" {
		t.Errorf("shadowed %+v, want /last only", got)
	}

	// A live policy is offered, not mirrored.
	if a := e.do(http.MethodGet, "/v1/policies/web:authorize/healthz", strings.NewReader(""), nil); a.code != 200 {
		t.Fatalf("web: %d", a.code)
	}
	deadline := time.Now().Add(10 * time.Second)
	var offered []string
	for len(offered) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		offered = pv.takeOffered()
	}
	if len(offered) != 1 || offered[0] != "web" || len(rec.take()) != 0 {
		t.Errorf("offered %v", offered)
	}
}
