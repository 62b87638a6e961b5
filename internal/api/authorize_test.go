package api

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// wantGatewayAnswer checks an answer of a gateway form that is not a
// policy's decision: code (200 or 403), no body, X-Policy-Error starting
// with errPrefix.
func wantGatewayAnswer(t *testing.T, a answer, code int, errPrefix string) {
	t.Helper()
	if a.code != code || len(a.body) != 0 {
		t.Fatalf("answer = %d %q, want %d with no body", a.code, a.body, code)
	}
	want := map[int]string{200: "ALLOW", 403: "DENY"}[code]
	if got := a.header.Get("X-Policy-Decision"); got != want {
		t.Errorf("X-Policy-Decision = %q, want %q", got, want)
	}
	if e := a.header.Get("X-Policy-Error"); !strings.HasPrefix(e, errPrefix) || len(e) == len(errPrefix) {
		t.Errorf("X-Policy-Error = %q, want %q and a reason", e, errPrefix)
	}
	if r := a.header.Values("X-Policy-Rule"); len(r) != 0 {
		t.Errorf("X-Policy-Rule = %q on an undecided answer", r)
	}
}

// TestAuthorizeFailureMode: when a node cannot decide (no generation yet,
// an unknown policy, a pinned generation it does not keep), the gateway
// form answers the failure mode, 403 or 200, never 404 or 503.
func TestAuthorizeFailureMode(t *testing.T) {
	modes := FailureModes{Default: FailureDeny, Policies: map[string]FailureMode{"open": FailureAllow}}
	e := newTestEnv(t, Config{FailureModes: modes})
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/nope:authorize", nil, nil), 403, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/open:authorize", nil, nil), 200, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/NOT%20valid:authorize/x", nil, nil), 403, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/generations/3/policies/web:authorize", nil, nil), 403, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/generations/3/policies/open:authorize", nil, nil), 200, "NOT_FOUND: ")
	wantGatewayAnswer(t, e.do("GET", "/v1/generations/0/policies/web:authorize/healthz", nil, nil), 403, "NOT_FOUND: ")
	if a := e.do("GET", "/v1/policies/nope:authorize", nil, nil); a.header.Get("X-Policy-Generation") != "7" {
		t.Errorf("X-Policy-Generation = %q, want the generation that had no such policy", a.header.Get("X-Policy-Generation"))
	}

	allow := newTestEnv(t, Config{Generations: &fakeGenerations{}, FailureModes: FailureModes{Default: FailureAllow}})
	wantGatewayAnswer(t, allow.do("GET", "/v1/policies/web:authorize", nil, nil), 200, "UNAVAILABLE: ")
	wantGatewayAnswer(t, allow.do("POST", "/v1/generations/7/policies/web:authorize/x", nil, nil), 200, "UNAVAILABLE: ")
	deny := newTestEnv(t, Config{Generations: &fakeGenerations{}})
	wantGatewayAnswer(t, deny.do("GET", "/v1/policies/web:authorize", nil, nil), 403, "UNAVAILABLE: ")
}

// TestAuthorizeErrorHeaderIsSafe: the reason carries the policy name from
// the path; it stays one printable, bounded header value.
func TestAuthorizeErrorHeaderIsSafe(t *testing.T) {
	e := newTestEnv(t, Config{})
	a := e.do(http.MethodGet, "/v1/policies/"+strings.Repeat("%0d%0aX-Evil=y%e2%82%ac", 50)+":authorize", nil, nil)
	wantGatewayAnswer(t, a, 403, "NOT_FOUND: ")
	v := a.header.Get("X-Policy-Error")
	if len(v) > maxErrorHeader || a.header.Get("X-Evil") != "" || strings.ContainsAny(v, "\r\n\u20ac") {
		t.Errorf("X-Policy-Error = %q", v)
	}
}

// TestAuthorizePinned: a gateway can pin the generation it asks, as
// :evaluate can; the active one and the one before it are kept.
func TestAuthorizePinned(t *testing.T) {
	e := newTestEnv(t, Config{})
	old := e.gens.Current()
	e.gens.set(&Snapshot{Generation: 8, Bundle: old.Bundle})
	for _, gen := range []string{"7", "8"} {
		a := e.do("GET", "/v1/generations/"+gen+"/policies/web:authorize/admin/x", nil, nil)
		if a.code != 403 || a.header.Get("X-Policy-Rule") != "block-admin" || a.header.Get("X-Policy-Generation") != gen {
			t.Errorf("pinned to %s: %d %v", gen, a.code, a.header)
		}
		a = e.do("GET", "/v1/generations/"+gen+"/policies/web:authorize", nil, map[string]string{"X-Original-URI": "/healthz"})
		if a.code != 200 || a.header.Get("X-Policy-Generation") != gen {
			t.Errorf("pinned to %s: %d %v", gen, a.code, a.header)
		}
	}
}

// BenchmarkAuthorize is the gateway form's handler (nginx's headers, no
// network) and the Authorize call the ext_authz gRPC service makes.
func BenchmarkAuthorize(b *testing.B) {
	s := benchServer(b)
	b.Run("http-handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/v1/policies/bench:authorize", nil)
			r.Header.Set("X-Original-Method", "GET")
			r.Header.Set("X-Original-URI", "/svc060/item?x=1")
			s.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK && rec.Code != http.StatusForbidden {
				b.Fatalf("status %d", rec.Code)
			}
		}
	})
	check := &GatewayCheck{Method: "GET", URI: "/svc060/item?x=1", Host: "www.example", Header: http.Header{"User-Agent": {"bench"}},
		Peer: netip.MustParseAddr("198.51.100.1")}
	b.Run("authorize-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if a := s.Authorize(check, "bench", 0); a.Error != "" {
				b.Fatal(a.Error)
			}
		}
	})
}
