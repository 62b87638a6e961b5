package tlsconfig

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// trackedConn is an accepted connection as the node port counts it,
// under the *tls.Conn (which raft and net/http then see unchanged): its
// deadline is the ClientHello's until the hello is in, then the whole
// handshake's; once the peer is known it holds a slot of that node, given
// back when the connection closes, by whoever closes it.
type trackedConn struct {
	net.Conn
	src      source
	accepted time.Time
	lim      limits
	hello    atomic.Bool

	mu    sync.Mutex
	slots *slots // set while the connection holds a slot of node
	node  string
}

// track starts counting raw, accepted now from src: it must send its
// ClientHello within lim.hello.
func track(raw net.Conn, src source, lim limits) *trackedConn {
	c := &trackedConn{Conn: raw, src: src, accepted: time.Now(), lim: lim}
	_ = raw.SetDeadline(c.accepted.Add(lim.hello))
	return c
}

// helloDone moves the deadline to the handshake's: the ClientHello is in.
func (c *trackedConn) helloDone() {
	c.hello.Store(true)
	_ = c.Conn.SetDeadline(c.accepted.Add(c.lim.handshake))
}

// handshakeDone clears the deadline: raft and net/http set their own.
func (c *trackedConn) handshakeDone() { _ = c.Conn.SetDeadline(time.Time{}) }

// hold takes a slot of node id in s; false when the node has its fill.
func (c *trackedConn) hold(s *slots, id string) bool {
	if !s.openConn(id) {
		return false
	}
	c.mu.Lock()
	c.slots, c.node = s, id
	c.mu.Unlock()
	return true
}

// Close closes the connection and gives its node slot back (once).
func (c *trackedConn) Close() error {
	c.mu.Lock()
	s, id := c.slots, c.node
	c.slots = nil
	c.mu.Unlock()
	if s != nil {
		s.closeConn(id)
	}
	return c.Conn.Close()
}

// failure names why a handshake on c failed: a deadline before or after
// the ClientHello, or anything else.
func (c *trackedConn) failure(err error) string {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return RefusedHandshake
	}
	if c.hello.Load() {
		return RefusedHandshakeTimeout
	}
	return RefusedHelloTimeout
}

// withHelloDeadline returns conf with a GetConfigForClient that first
// tells the connection its ClientHello is in (it is called once the whole
// hello is read), then does what conf's own did.
func withHelloDeadline(conf *tls.Config) *tls.Config {
	conf = conf.Clone()
	next := conf.GetConfigForClient
	conf.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		if c, ok := h.Conn.(*trackedConn); ok {
			c.helloDone()
		}
		if next == nil {
			return nil, nil
		}
		return next(h)
	}
	return conf
}

// abort closes c at once with a reset (SO_LINGER 0) instead of a
// graceful close: a refused flood then leaves no TIME_WAIT sockets on the
// node. Only for connections we wrote nothing to that the peer needs.
func abort(c net.Conn) {
	raw := c
	if t, ok := c.(*trackedConn); ok {
		raw = t.Conn
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}
