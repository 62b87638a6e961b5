package raftstore

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/logging"
)

// DialFunc opens a connection to another node's raft port: for TLS, the
// handshake is done when it returns (tlsconfig.Node.Dial).
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// StreamLayer carries raft's NetworkTransport over connections another
// layer accepts and dials: a mutual-TLS port in production (Consul's and
// rqlite's raft layers do the same), where the listener yields only peers
// that proved a node certificate of the cluster CA.
type StreamLayer struct {
	net.Listener
	advertise net.Addr
	dial      DialFunc
	identity  *Identity // nil: any peer the listener yields may send any RPC
}

// Identity ties raft to node certificates (NewIdentityStreamLayer).
type Identity struct {
	// PeerID returns the node id the certificate of an accepted
	// connection names (tlsconfig.ConnPeerID).
	PeerID func(net.Conn) (string, error)
	// Dial opens a connection to the node at addr; id, when not empty,
	// is the node the server's certificate must name
	// (tlsconfig.Node.Dial).
	Dial func(ctx context.Context, addr, id string) (net.Conn, error)
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer returns a stream layer accepting from ln and dialling
// with dial; advertise is the address peers reach this node at (nil means
// ln's address).
func NewStreamLayer(ln net.Listener, advertise net.Addr, dial DialFunc) *StreamLayer {
	return &StreamLayer{Listener: ln, advertise: advertise, dial: dial}
}

// NewIdentityStreamLayer is a stream layer over mutual TLS on which raft
// accepts an RPC only from a connection whose certificate names the node
// the RPC's header claims to be, and only while the raft configuration
// this node knows holds that node (or holds nobody: a node that has not
// joined yet). Raft dials a member asking for the certificate of the node
// the configuration has at that address. A node removed from the
// configuration has its connections closed.
func NewIdentityStreamLayer(ln net.Listener, advertise net.Addr, id Identity) *StreamLayer {
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return id.Dial(ctx, addr, "") }
	return &StreamLayer{Listener: ln, advertise: advertise, dial: dial, identity: &id}
}

// Addr is the address raft advertises.
func (s *StreamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}

// Dial implements raft.StreamLayer.
func (s *StreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(addr))
}

// newStreamTransport is raft's NetworkTransport over cfg.StreamLayer, with
// the pool and timeout of the TCP transport it replaces; over an identity
// stream layer, the idTransport that checks every RPC's sender.
func newStreamTransport(cfg Config) raft.Transport {
	if s, ok := cfg.StreamLayer.(*StreamLayer); ok && s.identity != nil {
		return newIDTransport(s, cfg)
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: cfg.StreamLayer, MaxPool: 3, Timeout: 10 * time.Second, Logger: cfg.Logger.Named(logging.Raft),
	})
}

// Probe sends one raft RPC to the node at addr and waits up to timeout for
// its answer: an AppendEntries of term 0 with no entries, which a member
// of any cluster ignores (its term is higher) and a fresh node answers
// without changing its log. A leader probes a node before adding it as a
// voter: one that accepts connections but never answers raft would
// otherwise count towards the quorum and could stall the cluster.
func Probe(dial DialFunc, addr string, timeout time.Duration) error {
	return ProbeAs(dial, "", addr, timeout)
}

// ProbeAs is Probe with the RPC header naming node from: a node that ties
// raft RPCs to certificates (NewIdentityStreamLayer) refuses an RPC whose
// header does not name the node of the prober's certificate.
func ProbeAs(dial DialFunc, from, addr string, timeout time.Duration) error {
	t := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: DialOnly(dial), MaxPool: 0, Timeout: timeout, Logger: hclog.NewNullLogger(),
	})
	defer t.Close()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(from)}}
	var resp raft.AppendEntriesResponse
	done := make(chan error, 1)
	go func() { done <- t.AppendEntries("", raft.ServerAddress(addr), req, &resp) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("raft RPC to %s: %w", addr, err)
		}
		return nil
	case <-time.After(timeout + time.Second):
		// Dialling is bounded by timeout; this catches a stuck handshake.
		return fmt.Errorf("raft RPC to %s: no answer within %s", addr, timeout)
	}
}

// DialOnly is a stream layer that only dials: for a NetworkTransport that
// sends RPCs and never serves any (Probe, and tests that speak raft to a
// node).
func DialOnly(dial DialFunc) raft.StreamLayer {
	return &dialOnly{dial: dial, closed: make(chan struct{})}
}

// dialOnly is DialOnly's stream layer.
type dialOnly struct {
	dial   DialFunc
	closed chan struct{}
	once   sync.Once
}

func (d *dialOnly) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.dial(ctx, string(addr))
}

// Accept blocks until Close: the transport's accept loop then ends.
func (d *dialOnly) Accept() (net.Conn, error) {
	<-d.closed
	return nil, net.ErrClosed
}

func (d *dialOnly) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

func (d *dialOnly) Addr() net.Addr { return &net.TCPAddr{} }

// TCPDial is the DialFunc of a plaintext raft port.
func TCPDial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
