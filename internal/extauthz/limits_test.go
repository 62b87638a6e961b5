package extauthz

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// TestCheckHeaderCap (issue 22, finding 6): a Check of more headers than
// [api] max_request_headers is a malformed check: denied with an
// INVALID_ARGUMENT reason that gives the count, never a header value.
func TestCheckHeaderCap(t *testing.T) {
	e := newEnv(t, api.FailureModes{Default: api.FailureAllow})
	headers := map[string]string{}
	for i := range engine.DefaultMaxHeaders + 1 {
		headers["x-pad-"+strconv.Itoa(i)] = "secret-" + strconv.Itoa(i)
	}
	resp := e.check(t, checkReq{method: "GET", path: "/healthz", host: "h", source: "203.0.113.9", headers: headers})
	h := headersOfResponse(resp)
	if resp.GetStatus().GetCode() != int32(code.Code_PERMISSION_DENIED) ||
		!strings.HasPrefix(h["x-policy-error"], "INVALID_ARGUMENT: the request has "+strconv.Itoa(engine.DefaultMaxHeaders+1)+" headers") {
		t.Errorf("Check over the cap: %v %v", resp.GetStatus(), h)
	}
	if strings.Contains(resp.String(), "secret-") {
		t.Errorf("the answer echoes a header value: %v", resp)
	}
	delete(headers, "x-pad-0")
	resp = e.check(t, checkReq{method: "GET", path: "/healthz", host: "h", source: "203.0.113.9", headers: headers})
	if h := headersOfResponse(resp); h["x-policy-error"] != "" || h["x-policy-generation"] != "7" {
		t.Errorf("Check of %d headers not decided by the policy: %v %v", engine.DefaultMaxHeaders, resp.GetStatus(), h)
	}
}

// TestCheckInFlightCap (issue 22, finding 6): Checks share the node's
// bound on decisions in flight with the HTTP forms; past it a Check is
// UNAVAILABLE (Envoy's failure_mode_allow applies), counted, and the next
// Check after a slot frees is answered.
func TestCheckInFlightCap(t *testing.T) {
	g := &gens{}
	g.set(7, testBundle(t))
	a := api.New(api.Config{Generations: g, Logger: testlog.New(t), TrustedProxies: trusted, MaxDecisionsInFlight: 1})
	s := New(Config{Addr: "127.0.0.1:0", Authorizer: a, Logger: testlog.New(t)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := authv3.NewAuthorizationClient(conn)
	hs := startHTTP(t, a)

	// A decision being decoded and evaluated holds the one slot (an HTTP
	// decision takes it only once its body is in, for microseconds).
	if !a.AdmitDecision(api.FormEvaluate) {
		t.Fatal("the free slot was refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := checkReq{method: "GET", path: "/healthz", host: "h", source: "203.0.113.9"}.proto()
	_, err = client.Check(ctx, req)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "max_decisions_in_flight") {
		t.Fatalf("Check past the bound: %v, want UNAVAILABLE", err)
	}
	if !strings.Contains(scrape(t, hs), `reconciler_decisions_shed_total{form="check",reason="in_flight"} 1`+"\n") {
		t.Error("the shed Check is not counted")
	}
	a.DoneDecision()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		resp, err := client.Check(ctx, req)
		if err == nil && headersOfResponse(resp)["x-policy-error"] == "" { // the policy decided
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Check after the slot freed: %v %v", resp.GetStatus(), err)
		}
	}
}

// startHTTP serves a over HTTP.
func startHTTP(t *testing.T, a *api.Server) string {
	hs := httptest.NewServer(a)
	t.Cleanup(hs.Close)
	return hs.URL
}

// scrape reads /metrics.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
