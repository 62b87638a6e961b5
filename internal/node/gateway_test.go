package node

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/policyrollout/reconciler/internal/extauthz"
)

// TestNodeServesExtAuthz: with [api] grpc_addr a node answers Envoy's
// Check from the generation it serves, and stops answering when it stops.
func TestNodeServesExtAuthz(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	cfg.API.GRPCAddr = "127.0.0.1:0"
	cfg.API.FailureModes = map[string]string{"open": "allow"}
	m := &Main{Config: cfg, Logger: testLogger(t)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "generation 1", func() error { return serves("http://"+m.Addr(), 1) })
	conn, err := grpc.NewClient(m.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := authv3.NewAuthorizationClient(conn)
	check := func(policy, path string) int32 {
		t.Helper()
		r, err := client.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Source:            &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "198.51.100.1"}}}},
			Request:           &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: http.MethodGet, Path: path}},
			ContextExtensions: map[string]string{extauthz.ExtPolicy: policy},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus().GetCode()
	}
	if c := check("web", "/v1"); c != int32(code.Code_OK) {
		t.Errorf("allowed path: %v", c)
	}
	if c := check("web", "/nope"); c != int32(code.Code_PERMISSION_DENIED) {
		t.Errorf("denied path: %v", c)
	}
	if c := check("open", "/nope"); c != int32(code.Code_OK) {
		t.Errorf("unknown policy failing open per [api.failure_modes]: %v", c)
	}
	if r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v %v", r, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(ctx, &authv3.CheckRequest{}); err == nil {
		t.Error("a Check was answered after Close")
	}
}

// TestNodePathEscapedSlashes: [api] path_escaped_slashes reaches the
// gateway forms of a running node: "/x%2F..%2Fv1" (which a backend that
// decodes "%2F" reads as /v1) is refused by default, and is "/v1", which
// the "v1" rule allows, with "unescape".
func TestNodePathEscapedSlashes(t *testing.T) {
	for value, wantAllow := range map[string]bool{"": false, "unescape": true} {
		cfg := singleNode(t, webPolicy(1))
		if value != "" {
			cfg.API.PathEscapedSlashes = value
		}
		m := &Main{Config: cfg, Logger: testLogger(t)}
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		eventually(t, waitTimeout, "generation 1", func() error { return serves("http://"+m.Addr(), 1) })
		req, err := http.NewRequest(http.MethodGet, "http://"+m.Addr()+"/v1/policies/web:authorize", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Original-URI", "/x%2F..%2Fv1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == http.StatusOK) != wantAllow {
			t.Errorf("path_escaped_slashes %q: %d %s", value, resp.StatusCode, resp.Header.Get("X-Policy-Error"))
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
