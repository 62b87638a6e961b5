package extauthz

import (
	"context"
	"net/http"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/policyrollout/reconciler/internal/api"
)

// wantAnswer checks a CheckResponse: OK with an OkResponse, or
// PERMISSION_DENIED with a 403 DeniedResponse; rule and error as given.
func wantAnswer(t *testing.T, r *authv3.CheckResponse, allow bool, rule, errPrefix string) {
	t.Helper()
	h := headersOfResponse(r)
	if allow {
		if r.GetStatus().GetCode() != int32(code.Code_OK) || r.GetOkResponse() == nil || h["x-policy-decision"] != "ALLOW" {
			t.Fatalf("want OK: %v", r)
		}
		if len(r.GetOkResponse().GetHeaders()) != len(r.GetOkResponse().GetResponseHeadersToAdd()) {
			t.Errorf("the upstream request and the client's response carry different headers: %v", r)
		}
	} else {
		d := r.GetDeniedResponse()
		if r.GetStatus().GetCode() != int32(code.Code_PERMISSION_DENIED) || d == nil || d.GetStatus().GetCode() != typev3.StatusCode_Forbidden || h["x-policy-decision"] != "DENY" {
			t.Fatalf("want PERMISSION_DENIED with a 403: %v", r)
		}
	}
	if h["x-policy-rule"] != rule {
		t.Errorf("x-policy-rule = %q, want %q (%v)", h["x-policy-rule"], rule, h)
	}
	if e := h["x-policy-error"]; (errPrefix == "" && e != "") || (errPrefix != "" && (len(e) <= len(errPrefix) || e[:len(errPrefix)] != errPrefix)) {
		t.Errorf("x-policy-error = %q, want prefix %q", e, errPrefix)
	}
}

var cases = []struct {
	name  string
	req   checkReq
	allow bool
	rule  string
}{
	{"public GET", checkReq{method: "GET", path: "/public/a?lang=de", host: "www.example", source: "198.51.100.9"}, true, "public-get"},
	{"query decoded, first value", checkReq{method: "GET", path: "/public/a?lang=xx&lang=de", host: "www.example", source: "198.51.100.9"}, false, ""},
	{"admin denied", checkReq{method: "GET", path: "/admin/users", source: "198.51.100.9"}, false, "block-admin"},
	{"percent-decoded path", checkReq{method: "GET", path: "/%61dmin/users", source: "198.51.100.9"}, false, "block-admin"},
	{"repeated slashes merged", checkReq{method: "GET", path: "//admin/users", source: "198.51.100.9"}, false, "block-admin"},
	{"dot segments removed", checkReq{method: "GET", path: "/public/../admin/./users", source: "198.51.100.9"}, false, "block-admin"},
	{"office source", checkReq{method: "POST", path: "/x", source: "10.1.2.3"}, true, "office"},
	{"forwarded from a trusted source", checkReq{method: "POST", path: "/x", source: "192.0.2.1",
		headers: map[string]string{"x-forwarded-for": "10.1.2.3"}}, true, "office"},
	{"forwarded from an untrusted source ignored", checkReq{method: "POST", path: "/x", source: "198.51.100.9",
		headers: map[string]string{"x-forwarded-for": "10.1.2.3"}}, false, ""},
	{"host and headers", checkReq{method: "PUT", path: "/p", host: "Partner.Example", source: "198.51.100.9",
		headers: map[string]string{"x-partner": "acme", ":authority": "ignored"}}, true, "partner"},
}

func TestCheck(t *testing.T) {
	e := newEnv(t, api.FailureModes{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.check(t, tc.req)
			wantAnswer(t, r, tc.allow, tc.rule, "")
			if g := headersOfResponse(r)["x-policy-generation"]; g != "7" {
				t.Errorf("x-policy-generation = %q", g)
			}
		})
	}
}

// TestCheckSameAsHTTP: the gRPC form and the HTTP form build the same
// request (one function) and so give the same decision.
func TestCheckSameAsHTTP(t *testing.T) {
	e := newEnv(t, api.FailureModes{})
	for _, tc := range cases {
		req, err := http.NewRequest(http.MethodGet, e.http.URL+"/v1/policies/web:authorize", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.req.host
		for k, v := range tc.req.headers {
			if k[0] != ':' { // HTTP/1.1 has no pseudo-headers
				req.Header.Set(k, v)
			}
		}
		req.Header.Set("X-Original-Method", tc.req.method)
		req.Header.Set("X-Original-URI", tc.req.path)
		// The HTTP check comes from 127.0.0.1, a trusted proxy: the
		// source Envoy saw is its last X-Forwarded-For hop.
		req.Header.Set("X-Forwarded-For", joinHops(tc.req.headers["x-forwarded-for"], tc.req.source))
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		g := e.check(t, tc.req)
		gh := headersOfResponse(g)
		if (resp.StatusCode == 200) != (g.GetOkResponse() != nil) || resp.Header.Get("X-Policy-Rule") != gh["x-policy-rule"] {
			t.Errorf("%s: HTTP %d %q, gRPC %v", tc.name, resp.StatusCode, resp.Header.Get("X-Policy-Rule"), gh)
		}
	}
}

func joinHops(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

// TestCheckFailureModes: what the node answers when it cannot decide is
// its failure mode, as on :authorize, and never a gRPC error.
func TestCheckFailureModes(t *testing.T) {
	e := newEnv(t, api.FailureModes{Policies: map[string]api.FailureMode{"open": api.FailureAllow}})
	src := "198.51.100.9"
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/", source: src, ext: map[string]string{ExtPolicy: "nope"}}), false, "", "NOT_FOUND: ")
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/", source: src, ext: map[string]string{}}), false, "", "NOT_FOUND: ")
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/", source: src, ext: map[string]string{ExtPolicy: "open"}}), true, "", "NOT_FOUND: ")
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/", source: src, ext: map[string]string{ExtPolicy: "web", ExtGeneration: "3"}}), false, "", "NOT_FOUND: ")
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/", source: src, ext: map[string]string{ExtPolicy: "web", ExtGeneration: "x"}}), false, "", "INVALID_ARGUMENT: ")
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "::bad", source: src}), false, "", "INVALID_ARGUMENT: ")
	e.gens.mu.Lock()
	e.gens.cur = 0 // no generation loaded
	e.gens.mu.Unlock()
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/public/a", source: src}), false, "", "UNAVAILABLE: ")
	wantAnswer(t, e.check(t, checkReq{method: "GET", path: "/public/a", source: src, ext: map[string]string{ExtPolicy: "open"}}), true, "", "UNAVAILABLE: ")
}

// TestCheckPinned: the generation extension pins the decision.
func TestCheckPinned(t *testing.T) {
	e := newEnv(t, api.FailureModes{})
	e.gens.set(8, testBundle(t))
	for _, g := range []string{"7", "8"} {
		r := e.check(t, checkReq{method: "GET", path: "/admin", source: "198.51.100.9", ext: map[string]string{ExtPolicy: "web", ExtGeneration: g}})
		wantAnswer(t, r, false, "block-admin", "")
		if got := headersOfResponse(r)["x-policy-generation"]; got != g {
			t.Errorf("pinned to %s, answered by %s", g, got)
		}
	}
}

// TestHealth: the gRPC health service says SERVING for the server and for
// the Authorization service, and knows no other service.
func TestHealth(t *testing.T) {
	e := newEnv(t, api.FailureModes{})
	hc := healthpb.NewHealthClient(e.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", authv3.Authorization_ServiceDesc.ServiceName} {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v %v", svc, r, err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
		t.Error("health of an unknown service answered")
	}
}

// TestStopEndsServing: after Stop, no Check is answered.
func TestStopEndsServing(t *testing.T) {
	e := newEnv(t, api.FailureModes{})
	e.check(t, checkReq{method: "GET", path: "/", source: "198.51.100.9"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.grpc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Check(ctx, checkReq{method: "GET", path: "/", source: "198.51.100.9"}.proto()); err == nil {
		t.Error("a Check was answered after Stop")
	}
}

// BenchmarkCheck is one Check over a loopback gRPC connection, against
// one :authorize over a loopback HTTP connection, same decision.
func BenchmarkCheck(b *testing.B) {
	e := newEnv(b, api.FailureModes{})
	req := checkReq{method: "GET", path: "/public/a?lang=de", host: "www.example", source: "198.51.100.9"}.proto()
	b.Run("grpc-check", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if r, err := e.client.Check(ctx, req); err != nil || r.GetOkResponse() == nil {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("http-authorize", func(b *testing.B) {
		c := e.http.Client()
		for b.Loop() {
			hr, _ := http.NewRequest(http.MethodGet, e.http.URL+"/v1/policies/web:authorize", nil)
			hr.Header.Set("X-Original-URI", "/public/a?lang=de")
			resp, err := c.Do(hr)
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(resp, err)
			}
			resp.Body.Close()
		}
	})
}
