// Package extauthz serves Envoy's external authorization gRPC API
// (envoy.service.auth.v3.Authorization/Check, the protos of
// github.com/envoyproxy/go-control-plane) and the gRPC health service on
// [api] grpc_addr. A Check is turned into the same api.GatewayCheck the
// HTTP gateway form builds and decided by the same api.Server.Authorize, so
// both forms see the same request and answer the same way, failure modes
// included. See docs/gateways.md.
package extauthz

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/policyrollout/reconciler/internal/api"
)

// Authorizer decides gateway checks; api.Server implements it.
type Authorizer interface {
	Authorize(check *api.GatewayCheck, policy string, gen uint64) api.GatewayAnswer
}

var _ Authorizer = (*api.Server)(nil)

// Admitter bounds the decisions in flight; api.Server implements it, for
// its HTTP forms and this server alike, so both share one bound.
type Admitter interface {
	// AdmitDecision takes a slot, or reports false when all are taken.
	AdmitDecision(form string) bool
	// DoneDecision gives the slot back.
	DoneDecision()
	// MaxDecisionsInFlight is the bound, for the error message.
	MaxDecisionsInFlight() int
	// ReceivingDecision counts a Check from peer being received, or
	// reports false when peer has its limit of them being received;
	// ReceivedDecision ends it. A Check is received before its slot is
	// taken, so that a slow client holds none.
	ReceivingDecision(form string, peer netip.Addr) bool
	ReceivedDecision(peer netip.Addr)
	// MaxDecisionBodiesPerSource is that limit, for the error message.
	MaxDecisionBodiesPerSource() int
}

var _ Admitter = (*api.Server)(nil)

// DefaultMaxRecvBytes bounds one CheckRequest: Envoy sends the headers
// (60 KiB at most by default) and no body unless told to.
const DefaultMaxRecvBytes = 1 << 20

// DefaultMaxStreams bounds the concurrent Checks of one connection.
const DefaultMaxStreams = 1024

// Config holds a Server's dependencies.
type Config struct {
	// Addr is where to listen ("127.0.0.1:9191"; port 0 picks one).
	Addr string
	// Authorizer is required.
	Authorizer Authorizer
	// Logger is optional; nil discards.
	Logger hclog.Logger
	// MaxRecvBytes bounds a request; 0 means DefaultMaxRecvBytes.
	MaxRecvBytes int
	// Admitter bounds the Checks in flight; nil means the Authorizer's
	// when it is one (api.Server is), else no bound.
	Admitter Admitter
}

// Server is the gRPC server. Start it once, Stop it once.
type Server struct {
	cfg    Config
	log    hclog.Logger
	grpc   *grpc.Server
	health *health.Server
	ln     net.Listener
	served chan struct{}
	mu     sync.Mutex
	err    error
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxRecvBytes <= 0 {
		cfg.MaxRecvBytes = DefaultMaxRecvBytes
	}
	if ad, ok := cfg.Authorizer.(Admitter); ok && cfg.Admitter == nil {
		cfg.Admitter = ad
	}
	s := &Server{cfg: cfg, log: cfg.Logger, health: health.NewServer(), served: make(chan struct{})}
	s.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(cfg.MaxRecvBytes), grpc.MaxConcurrentStreams(DefaultMaxStreams),
		grpc.ForceServerCodecV2(newRawCodec()))
	s.grpc.RegisterService(&authorizationDesc, &authorization{az: cfg.Authorizer, admit: cfg.Admitter})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	return s
}

// Start listens on cfg.Addr and serves in the background; the health
// service answers SERVING for "" and the Authorization service.
func (s *Server) Start(context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on api.grpc_addr: %w", err)
	}
	s.ln = ln
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(authv3.Authorization_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	go func() {
		defer close(s.served)
		if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
	}()
	s.log.Info("ext_authz gRPC listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the server listens on, "" before Start.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Stop reports NOT_SERVING, lets in-flight Checks finish until ctx ends,
// then closes every connection. It returns why serving failed, if it did.
func (s *Server) Stop(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	s.health.Shutdown()
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	<-s.served
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("serve gRPC: %w", s.err)
	}
	return nil
}

// authorization implements envoy.service.auth.v3.Authorization.
type authorization struct {
	authv3.UnimplementedAuthorizationServer
	az    Authorizer
	admit Admitter // nil: no bound
}

// Check answers OK or PERMISSION_DENIED, never a gRPC error: Envoy would
// apply its own failure_mode_allow to an error, and the node's failure
// mode has already decided. (Only an overloaded node answers UNAVAILABLE,
// before Check runs: admit.go.)
func (a *authorization) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	t, ok := targetOf(req)
	if !ok {
		return misconfigured("context extension \"generation\" must be a generation number"), nil
	}
	return responseOf(a.az.Authorize(checkOf(req), t.policy, t.gen)), nil
}
