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
	// so a peer that connects and says nothing holds a goroutine that long.
	DefaultHandshakeTimeout = 5 * time.Second
	// maxHandshakes bounds the handshakes in flight; further connections
	// are closed at once.
	maxHandshakes = 256
	// handOffTimeout bounds the wait for raft or the HTTP server to take
	// an accepted connection.
	handOffTimeout = 10 * time.Second
)

// Mux accepts TLS on a node's raft port, verifies the peer (a node
// certificate from the cluster CA), and hands each connection to the
// listener of its ALPN protocol. Handshakes run in their own goroutines:
// a slow or hostile client never delays raft's accept loop. Every refused
// connection is logged (at most one line per second, with a count of the
// others), so an attempt to talk to raft without a certificate shows.
type Mux struct {
	node *Node
	ln   net.Listener
	conf *tls.Config
	log  hclog.Logger
	subs map[string]*subListener
	sem  chan struct{}
	done chan struct{}
	once sync.Once

	refusals *logging.Limiter // one refusal line a second, with the count of the others
}

// NewMux starts accepting on ln with node's server config; Close stops it.
func NewMux(ln net.Listener, node *Node, logger hclog.Logger) *Mux {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Mux{node: node, ln: ln, conf: node.ServerConfig(ProtoRaft, ProtoHTTP), log: logger,
		subs: map[string]*subListener{}, sem: make(chan struct{}, maxHandshakes), done: make(chan struct{}),
		refusals: logging.NewLimiter(1, time.Second)}
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

// Close stops accepting and closes the port.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
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
		select {
		case m.sem <- struct{}{}:
			go m.handshake(conn)
		default:
			m.refuse(conn, errors.New("too many handshakes in progress"))
		}
	}
}

func (m *Mux) handshake(raw net.Conn) {
	defer func() { <-m.sem }()
	conn := tls.Server(raw, m.conf)
	ctx, cancel := context.WithTimeout(context.Background(), DefaultHandshakeTimeout)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		m.refuse(raw, err)
		return
	}
	proto := conn.ConnectionState().NegotiatedProtocol
	sub := m.subs[proto]
	if sub == nil {
		m.refuse(raw, errors.New("the client named no reconciler protocol (ALPN)"))
		return
	}
	handed := &nodeConn{Conn: conn, m: m, state: conn.ConnectionState()}
	t := time.NewTimer(handOffTimeout)
	defer t.Stop()
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

// refuse closes conn and logs why, rate limited.
func (m *Mux) refuse(conn net.Conn, why error) {
	_ = conn.Close()
	ok, others := m.refusals.Allow()
	if !ok {
		return
	}
	m.log.Warn("refused a node-to-node connection: only cluster nodes with a certificate from the cluster CA may connect",
		"remote", conn.RemoteAddr().String(), "error", why, "others_refused", others)
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
		c.m.refuse(c.Conn, fmt.Errorf("%w since the connection was opened", ErrDenied))
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
