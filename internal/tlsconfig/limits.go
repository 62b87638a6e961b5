package tlsconfig

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Reasons the node port refuses a connection: the values of MuxStats.Refused's
// keys and of the reason label of reconciler_node_port_refused_total.
const (
	// RefusedHandshakes: the port had maxHandshakes handshakes in progress.
	RefusedHandshakes = "handshakes"
	// RefusedSourceHandshakes: the caller's address (an IPv6 /64) had
	// maxSourceHandshakes handshakes in progress.
	RefusedSourceHandshakes = "source_handshakes"
	// RefusedNodeConnections: the node the certificate names had
	// maxNodeConns connections open on this port.
	RefusedNodeConnections = "node_connections"
	// RefusedHelloTimeout: no complete ClientHello within helloTimeout
	// (a silent or dribbling connection).
	RefusedHelloTimeout = "hello_timeout"
	// RefusedHandshakeTimeout: a ClientHello, then no complete handshake
	// within DefaultHandshakeTimeout.
	RefusedHandshakeTimeout = "handshake_timeout"
	// RefusedHandshake: the handshake failed: plaintext, no certificate, a
	// certificate of another CA or naming no node, a closed connection.
	RefusedHandshake = "handshake"
	// RefusedProtocol: the client named no reconciler protocol (ALPN).
	RefusedProtocol = "protocol"
	// RefusedDenied: an open connection whose certificate was put on the
	// denylist after its handshake (a denied certificate's handshake
	// fails, RefusedHandshake).
	RefusedDenied = "denied"
)

// RefusalReasons lists every reason, for a metric to show them all from
// zero.
var RefusalReasons = []string{RefusedHandshakes, RefusedSourceHandshakes, RefusedNodeConnections,
	RefusedHelloTimeout, RefusedHandshakeTimeout, RefusedHandshake, RefusedProtocol, RefusedDenied}

// limits bound what one node port holds for callers (issue 22): before
// the handshake nobody is known, so the bounds are per source address and
// for the port; after it, per node. docs/security.md#node-port-handshakes
// explains the values.
type limits struct {
	// hello bounds the wait for a whole ClientHello, which a client
	// sends at once: a silent connection holds its slot that long.
	hello time.Duration
	// handshake bounds the whole handshake, from accept.
	handshake time.Duration
	// handshakes bounds the handshakes in progress on the port.
	handshakes int
	// perSource bounds the handshakes in progress from one address.
	perSource int
	// perNode bounds the connections open from one node identity.
	perNode int
}

// Default limits. perSource is above all a node opens to another at once
// (maxNodeConns), so a node alone never meets it, with room for more
// nodes behind one address; perNode is well above maxNodeConns too.
func defaultLimits() limits {
	return limits{
		hello:      time.Second,
		handshake:  DefaultHandshakeTimeout,
		handshakes: 512,
		perSource:  64,
		perNode:    128,
	}
}

// maxPeerHTTPConns bounds the connections a node's HTTP client opens to
// one other node (HTTPTransport), so that it stays under the receiver's
// bounds.
const maxPeerHTTPConns = 32

// maxNodeConns is the most connections one node opens to another: its HTTP
// client's, raft's (a pool of 3, the pipeline, a snapshot, a vote and
// TimeoutNow in flight, rounded up) and a join probe.
const maxNodeConns = maxPeerHTTPConns + 10 + 1

// source is what the per-address bound counts by: the IPv4 address, or
// the /64 of an IPv6 address (one host's allotment: an attacker with a
// /64 has 2^64 addresses). Connections that are not TCP share one source.
type source = netip.Prefix

// sourceOf returns the source of a connection's remote address.
func sourceOf(addr net.Addr) source {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return source{}
	}
	ip := tcp.AddrPort().Addr().Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// slots counts what the port holds against limits, and what it refused.
type slots struct {
	lim limits

	mu         sync.Mutex
	handshakes int
	bySource   map[source]int
	byNode     map[string]int
	conns      int
	refused    map[string]uint64
}

func newSlots(lim limits) *slots {
	return &slots{lim: lim, bySource: map[source]int{}, byNode: map[string]int{}, refused: map[string]uint64{}}
}

// startHandshake takes a handshake slot for src; "" when it got one,
// else the reason it did not.
func (s *slots) startHandshake(src source) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.bySource[src] >= s.lim.perSource:
		return RefusedSourceHandshakes
	case s.handshakes >= s.lim.handshakes:
		return RefusedHandshakes
	}
	s.handshakes++
	s.bySource[src]++
	return ""
}

// endHandshake gives src's handshake slot back.
func (s *slots) endHandshake(src source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handshakes--
	if s.bySource[src]--; s.bySource[src] <= 0 {
		delete(s.bySource, src)
	}
}

// openConn takes a connection slot of node id; false when it has
// perNode open.
func (s *slots) openConn(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byNode[id] >= s.lim.perNode {
		return false
	}
	s.byNode[id]++
	s.conns++
	return true
}

// closeConn gives a connection slot of node id back.
func (s *slots) closeConn(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns--
	if s.byNode[id]--; s.byNode[id] <= 0 {
		delete(s.byNode, id)
	}
}

// refuse counts a refusal.
func (s *slots) refuse(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[why]++
}

// MuxStats is what a node port holds and what it refused since it started.
type MuxStats struct {
	Handshakes  int               // in progress
	Connections int               // handed to raft or HTTP, not closed yet
	Refused     map[string]uint64 // by reason (Refused* constants)
}

func (s *slots) stats() MuxStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := MuxStats{Handshakes: s.handshakes, Connections: s.conns, Refused: make(map[string]uint64, len(s.refused))}
	for k, v := range s.refused {
		out.Refused[k] = v
	}
	return out
}
