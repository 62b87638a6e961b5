package extauthz

import (
	"context"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/policyrollout/reconciler/internal/api"
)

// authorizationDesc is Envoy's Authorization service with a Check handler
// that takes a decision slot before it decodes the request: the generated
// handler decodes first, and decoding a 1 MiB CheckRequest of small
// headers is where most of a Check's memory goes. Names and types are the
// generated ones, so clients see the same service.
var authorizationDesc = grpc.ServiceDesc{
	ServiceName: authv3.Authorization_ServiceDesc.ServiceName,
	HandlerType: (*authv3.AuthorizationServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Check", Handler: admittedCheck}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    authv3.Authorization_ServiceDesc.Metadata,
}

// retryPushback is gRPC's retry pushback (the Retry-After of gRPC), sent
// with an overloaded answer.
const retryPushback = "1000"

// admittedCheck decodes and answers a Check within a decision slot. Past
// the bound it answers UNAVAILABLE with a retry pushback, without reading
// the request: Envoy then applies its failure_mode_allow, as it would to a
// node that is down. No interceptor is installed, so none is called.
func admittedCheck(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	a := srv.(*authorization)
	if a.admit != nil {
		if !a.admit.AdmitDecision(api.FormCheck) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", retryPushback))
			return nil, status.Error(codes.Unavailable, overloadedMessage(a.admit.MaxDecisionsInFlight()))
		}
		defer a.admit.DoneDecision()
	}
	in := new(authv3.CheckRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	return a.Check(ctx, in)
}

// overloadedMessage is the HTTP forms' 503 message.
func overloadedMessage(limit int) string {
	return api.ErrOverloaded(limit).Error()
}
