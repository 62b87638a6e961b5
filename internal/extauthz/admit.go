package extauthz

import (
	"context"
	"net"
	"net/netip"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	gproto "google.golang.org/protobuf/proto"

	"github.com/policyrollout/reconciler/internal/api"
)

// authorizationDesc is Envoy's Authorization service with a Check handler
// that receives the request, then takes a decision slot, then decodes it:
// the generated handler receives and decodes in one call, and decoding a
// 1 MiB CheckRequest of small headers is where most of a Check's memory
// goes, while receiving it takes as long as the client likes (gRPC
// delivers the message inside the handler's decode). Names and types are
// the generated ones, so clients see the same service.
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

// admittedCheck receives a Check, then decodes and answers it within a
// decision slot, so that a client sending its message slowly holds none.
// Past the bound it answers UNAVAILABLE with a retry pushback, without
// decoding the request: Envoy then applies its failure_mode_allow, as it
// would to a node that is down. No interceptor is installed, so none is
// called.
func admittedCheck(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	a := srv.(*authorization)
	raw, err := a.receive(ctx, dec)
	if err != nil {
		return nil, err
	}
	defer raw.free()
	if a.admit != nil {
		if !a.admit.AdmitDecision(api.FormCheck) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", retryPushback))
			return nil, status.Error(codes.Unavailable, overloadedMessage(a.admit.MaxDecisionsInFlight()))
		}
		defer a.admit.DoneDecision()
	}
	in := new(authv3.CheckRequest)
	if err := gproto.Unmarshal(raw.buf.ReadOnlyData(), in); err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return a.Check(ctx, in)
}

// receive receives a Check's message without decoding it, within the
// per-source cap of decision bodies being received.
func (a *authorization) receive(ctx context.Context, dec func(any) error) (*rawMessage, error) {
	raw := new(rawMessage)
	if a.admit == nil {
		return raw, dec(raw)
	}
	src := peerAddr(ctx)
	if !a.admit.ReceivingDecision(api.FormCheck, src) {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", retryPushback))
		return nil, status.Errorf(codes.Unavailable, "this address is sending its limit of %d decisions at once ([api] max_decision_bodies_per_source); retry shortly",
			a.admit.MaxDecisionBodiesPerSource())
	}
	defer a.admit.ReceivedDecision(src)
	return raw, dec(raw)
}

// peerAddr is the address of ctx's gRPC peer, the zero Addr when it has
// none (every such peer is one source).
func peerAddr(ctx context.Context) netip.Addr {
	if p, ok := peer.FromContext(ctx); ok {
		if t, ok := p.Addr.(*net.TCPAddr); ok {
			return t.AddrPort().Addr()
		}
	}
	return netip.Addr{}
}

// rawMessage is a received message not decoded yet.
type rawMessage struct{ buf mem.Buffer }

func (m *rawMessage) free() {
	if m.buf != nil {
		m.buf.Free()
	}
}

// rawCodec is gRPC's proto codec but for a *rawMessage, which it fills with
// the received bytes (one reference to gRPC's pooled buffers, no decoding),
// so that admittedCheck receives a Check before it takes a slot.
type rawCodec struct{ encoding.CodecV2 }

// newRawCodec wraps the proto codec.
func newRawCodec() rawCodec { return rawCodec{encoding.GetCodecV2(proto.Name)} }

// Unmarshal keeps data in a *rawMessage, else decodes it as proto does.
func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*rawMessage); ok {
		m.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// overloadedMessage is the HTTP forms' 503 message.
func overloadedMessage(limit int) string {
	return api.ErrOverloaded(limit).Error()
}
