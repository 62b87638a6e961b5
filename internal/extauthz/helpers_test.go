package extauthz

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
)

// gens is a hand-written api.Generations.
type gens struct {
	mu  sync.Mutex
	byN map[uint64]*api.Snapshot
	cur uint64
}

func (g *gens) Current() *api.Snapshot { g.mu.Lock(); defer g.mu.Unlock(); return g.byN[g.cur] }
func (g *gens) Get(n uint64) *api.Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byN[n]
}

func (g *gens) set(n uint64, b *engine.Bundle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byN == nil {
		g.byN = map[uint64]*api.Snapshot{}
	}
	g.byN[n], g.cur = &api.Snapshot{Generation: n, Bundle: b}, n
}

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

// trusted is the proxy range of the test servers.
var trusted = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("127.0.0.0/8")}

// env is one api.Server served over gRPC (ext_authz) and HTTP (:authorize).
type env struct {
	gens   *gens
	api    *api.Server
	grpc   *Server
	http   *httptest.Server
	client authv3.AuthorizationClient
	conn   *grpc.ClientConn
}

func newEnv(t testing.TB, modes api.FailureModes) *env {
	t.Helper()
	return newEnvWith(t, testBundle(t), api.Config{FailureModes: modes})
}

// newEnvWith serves b as generation 7 with cfg, whose generations, logger
// and trusted proxies it fills.
func newEnvWith(t testing.TB, b *engine.Bundle, cfg api.Config) *env {
	t.Helper()
	g := &gens{}
	g.set(7, b)
	cfg.Generations, cfg.Logger, cfg.TrustedProxies = g, testlog.New(t), trusted
	a := api.New(cfg)
	s := New(Config{Addr: "127.0.0.1:0", Authorizer: a, Logger: testlog.New(t)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hs := httptest.NewServer(a)
	t.Cleanup(hs.Close)
	return &env{gens: g, api: a, grpc: s, http: hs, client: authv3.NewAuthorizationClient(conn), conn: conn}
}

// checkReq is a CheckRequest as Envoy builds it.
type checkReq struct {
	method, path, host, scheme, source string
	headers                            map[string]string
	ext                                map[string]string
}

func (c checkReq) proto() *authv3.CheckRequest {
	ext := c.ext
	if ext == nil {
		ext = map[string]string{ExtPolicy: "web"}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: c.source, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}},
		}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: c.method, Path: c.path, Host: c.host, Scheme: c.scheme, Headers: c.headers,
		}},
		ContextExtensions: ext,
	}}
}

func (e *env) check(t *testing.T, c checkReq) *authv3.CheckResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.client.Check(ctx, c.proto())
	if err != nil {
		t.Fatalf("Check(%+v): %v", c, err)
	}
	return resp
}

// headersOfResponse reads the x-policy-* headers of an OK or denied answer.
func headersOfResponse(r *authv3.CheckResponse) map[string]string {
	var hs []*corev3.HeaderValueOption
	switch hr := r.GetHttpResponse().(type) {
	case *authv3.CheckResponse_OkResponse:
		hs = hr.OkResponse.GetResponseHeadersToAdd()
	case *authv3.CheckResponse_DeniedResponse:
		hs = hr.DeniedResponse.GetHeaders()
	}
	out := map[string]string{}
	for _, h := range hs {
		out[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	return out
}
