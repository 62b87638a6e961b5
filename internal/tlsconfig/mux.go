package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/logging"
)

// The ALPN protocols of the node-to-node port. A connection says which
// one it is in the handshake, so raft and the node-to-node HTTP API share
// one port (Consul and rqlite multiplex theirs with a first byte; ALPN
// does it before any application data is read).
const (
	ProtoRaft = "reconciler-raft/1"
	ProtoHTTP = "reconciler-peer-http/1"
)

const (
	// DefaultHandshakeTimeout bounds one TLS handshake on the node port,
	// from accept to the client's Finished; the ClientHello must come
	// within its first second (see limits).
	DefaultHandshakeTimeout = 5 * time.Second
	// handOffTimeout bounds the wait for raft or the HTTP server to take
	// an accepted connection.
	handOffTimeout = 10 * time.Second
)

// Mux accepts TLS on a node's raft port, verifies the peer (a node
// certificate from the cluster CA), and hands each connection to the
// listener of its ALPN protocol. Handshakes run in their own goroutines:
// a slow or hostile client never delays raft's accept loop. Before the
// handshake nobody is known, so what a caller may hold is bounded by its
// address and for the port, and a silent connection is dropped after a
// second; after it, by node (limits). Every refused connection is counted
// by reason (Stats) and logged (at most one line per second, with a count
// of the others), so an attempt to talk to raft without a certificate, or
// a flood, shows.
type Mux struct {
	node  *Node
	ln    net.Listener
	conf  *tls.Config
	log   hclog.Logger
	subs  map[string]*subListener
	lim   limits
	slots *slots
	ctx   context.Context // ends with Close: handshakes in progress stop
	stop  context.CancelFunc
	done  chan struct{}
	once  sync.Once

	refusals *logging.Limiter // one refusal line a second, with the count of the others
}

// NewMux starts accepting on ln with node's server config; Close stops it.
func NewMux(ln net.Listener, node *Node, logger hclog.Logger) *Mux {
	return newMux(ln, node, logger, defaultLimits())
}

func newMux(ln net.Listener, node *Node, logger hclog.Logger, lim limits) *Mux {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Mux{node: node, ln: ln, conf: withHelloDeadline(node.ServerConfig(ProtoRaft, ProtoHTTP)), log: logger,
		subs: map[string]*subListener{}, lim: lim, slots: newSlots(lim), ctx: ctx, stop: stop,
		done: make(chan struct{}), refusals: logging.NewLimiter(1, time.Second)}
	for _, p := range []string{ProtoRaft, ProtoHTTP} {
		m.subs[p] = &subListener{m: m, ch: make(chan net.Conn), closed: make(chan struct{})}
	}
	go m.serve()
	return m
}

// Listener returns the connections that negotiated proto (ProtoRaft or
// ProtoHTTP), with the handshake done; ConnPeerID names their node.
func (m *Mux) Listener(proto string) net.Listener { return m.subs[proto] }

// Addr is the bound address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Stats returns what the port holds now and what it refused, by reason.
func (m *Mux) Stats() MuxStats { return m.slots.stats() }

// Close stops accepting, ends the handshakes in progress and closes the
// port.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		m.stop()
		err = m.ln.Close()
	})
	return err
}

func (m *Mux) serve() {
	delay := 5 * time.Millisecond
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				_ = m.Close()
				return
			}
			time.Sleep(delay) // e.g. EMFILE: let descriptors free up
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		src := sourceOf(conn.RemoteAddr())
		if why := m.slots.startHandshake(src); why != "" {
			m.refuse(conn, why, nil)
			continue
		}
		go m.handshake(track(conn, src, m.lim))
	}
}

// handshake verifies raw's peer, gives its handshake slot back, and hands
// the connection over or refuses it.
func (m *Mux) handshake(raw *trackedConn) {
	conn, proto, why, err := m.verify(raw)
	m.slots.endHandshake(raw.src)
	if m.ctx.Err() != nil { // Close ended it: not a refusal
		_ = raw.Close()
		return
	}
	if why != "" {
		m.refuse(raw, why, err)
		return
	}
	m.handOff(conn, proto)
}

// verify runs the handshake on raw and takes a slot of the node it names;
// the reason and error of a refusal otherwise.
func (m *Mux) verify(raw *trackedConn) (*tls.Conn, string, string, error) {
	conn := tls.Server(raw, m.conf)
	if err := conn.HandshakeContext(m.ctx); err != nil {
		return nil, "", raw.failure(err), err
	}
	raw.handshakeDone()
	cs := conn.ConnectionState()
	proto := cs.NegotiatedProtocol
	if m.subs[proto] == nil {
		return nil, "", RefusedProtocol, errors.New("the client named no reconciler protocol (ALPN)")
	}
	id, err := PeerID(&cs)
	if err != nil {
		return nil, "", RefusedHandshake, err
	}
	if !raw.hold(m.slots, id) {
		return nil, "", RefusedNodeConnections,
			fmt.Errorf("node %s already has %d connections open on this port", id, m.lim.perNode)
	}
	return conn, proto, "", nil
}

// handOff gives conn to its protocol's listener, or closes it when that
// does not take it within handOffTimeout.
func (m *Mux) handOff(conn *tls.Conn, proto string) {
	handed := &nodeConn{Conn: conn, m: m, state: conn.ConnectionState()}
	t := time.NewTimer(handOffTimeout)
	defer t.Stop()
	sub := m.subs[proto]
	select {
	case sub.ch <- handed:
	case <-sub.closed:
		_ = conn.Close()
	case <-m.done:
		_ = conn.Close()
	case <-t.C:
		_ = conn.Close()
	}
}

// boundCause says which bound of the port a refusal met, for the log;
// the other refusals (a failed handshake) carry their own error.
var boundCause = map[string]string{
	RefusedHandshakes:       "too many handshakes in progress on this port",
	RefusedSourceHandshakes: "too many handshakes in progress from this address",
	RefusedNodeConnections:  "too many connections open from this node",
	RefusedHelloTimeout:     "no ClientHello in time",
	RefusedHandshakeTimeout: "the handshake did not finish within its deadline",
}

// refuse closes conn, counts it and logs why, rate limited. A connection
// refused before the handshake, or that timed out, is reset rather than
// closed: it was told nothing it needs, and a flood then leaves no
// TIME_WAIT sockets behind.
func (m *Mux) refuse(conn net.Conn, why string, err error) {
	switch why {
	case RefusedHandshake, RefusedProtocol, RefusedNodeConnections:
		_ = conn.Close() // the client may need the TLS alert written before
	default:
		abort(conn)
	}
	m.slots.refuse(why)
	ok, others := m.refusals.Allow()
	if !ok {
		return
	}
	msg := "refused a node-to-node connection: only cluster nodes with a certificate from the cluster CA may connect"
	if cause, bound := boundCause[why]; bound {
		msg = "refused a node-to-node connection: over a bound of the node port"
		if why != RefusedNodeConnections {
			err = errors.New(cause)
		}
	}
	m.log.Warn(msg, "remote", conn.RemoteAddr().String(), "reason", why, "error", err, "others_refused", others)
}

// nodeConn is a connection the Mux hands on. It ends the connection when
// the peer's certificate is denied after the handshake (the denylist
// reloaded), before any further byte of it is read. It also hides the
// *tls.Conn from net/http, which closes a TLS connection whose ALPN
// protocol it has no TLSNextProto handler for; net/http still fills
// Request.TLS from ConnectionState.
type nodeConn struct {
	*tls.Conn
	m     *Mux
	state tls.ConnectionState
}

// ConnectionState is the state of the handshake (PeerID reads it; net/http
// puts it in Request.TLS).
func (c *nodeConn) ConnectionState() tls.ConnectionState { return c.state }

// Read refuses the connection, instead of returning what it read, once
// the peer's certificate is on the denylist.
func (c *nodeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.m.node.deny != nil && c.m.node.Denied(&c.state) {
		c.m.refuse(c.Conn, RefusedDenied, fmt.Errorf("%w since the connection was opened", ErrDenied))
		return 0, net.ErrClosed
	}
	return n, err
}

// subListener is the net.Listener of one ALPN protocol.
type subListener struct {
	m      *Mux
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (s *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.ch:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

// Close stops this protocol only (raft closes its transport on shutdown
// while the HTTP side may still drain); Mux.Close closes the port.
func (s *subListener) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *subListener) Addr() net.Addr { return s.m.ln.Addr() }
