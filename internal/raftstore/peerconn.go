package raftstore

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerConn is one accepted raft connection of an idTransport, from the
// node id its certificate names, decoded by a NetworkTransport of its own
// so that every RPC it yields is known to come from that connection.
type peerConn struct {
	t       *idTransport
	id      string
	conn    net.Conn
	trans   *raft.NetworkTransport
	done    chan struct{}
	once    sync.Once
	refused atomic.Bool // no further byte of the connection reaches raft
}

// newPeerConn serves conn from node id: raft's decoder reads it, and
// each RPC is checked before raft's consumer (or heartbeat handler) sees
// it.
func newPeerConn(t *idTransport, id string, conn net.Conn) *peerConn {
	pc := &peerConn{t: t, id: id, conn: conn, done: make(chan struct{})}
	pc.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &oneConn{pc: pc, conn: &closeHook{Conn: conn, pc: pc}}, MaxPool: 0,
		Timeout: t.timeout, Logger: t.rlog,
	})
	pc.trans.SetHeartbeatHandler(pc.heartbeat)
	go pc.forward()
	return pc
}

// stop ends the connection the way a peer hanging up does: raft's reader
// sees the end of the stream (after answering the RPC it holds, if any)
// and closes the connection, which closes the transport (close). Closing
// the connection under raft instead would make it log an error per
// refused connection, which a peer could use to flood the log.
func (pc *peerConn) stop() {
	if pc.refused.Swap(true) {
		return
	}
	_ = pc.conn.SetReadDeadline(time.Now())
	_ = pc.conn.SetWriteDeadline(time.Now().Add(pc.t.timeout))
}

// close ends the connection and its transport once raft's reader has
// closed it, or at shutdown.
func (pc *peerConn) close() {
	pc.once.Do(func() {
		pc.refused.Store(true)
		_ = pc.trans.Close() // first: its accept loop then ends quietly
		close(pc.done)
		_ = pc.conn.Close()
		pc.t.forget(pc)
	})
}

// admitRPC checks rpc; a refused one is answered with an error and ends
// the connection (every RPC raft's reader still decodes after that is
// refused too).
func (pc *peerConn) admitRPC(rpc raft.RPC) bool {
	if pc.refused.Load() {
		rpc.Respond(nil, errRefused)
		return false
	}
	if err := pc.t.check(pc, rpc); err != nil {
		rpc.Respond(nil, errRefused)
		pc.t.refuse(pc, err)
		return false
	}
	return true
}

// forward hands the connection's checked RPCs to raft.
func (pc *peerConn) forward() {
	for {
		select {
		case rpc := <-pc.trans.Consumer():
			if !pc.admitRPC(rpc) {
				continue
			}
			pc.deliver(rpc)
		case <-pc.done:
			return
		case <-pc.t.shutdown:
			return
		}
	}
}

// deliver passes rpc to raft's consumer unless the connection or the
// transport closes first (raft's NetworkTransport then stops waiting for
// the answer too).
func (pc *peerConn) deliver(rpc raft.RPC) {
	select {
	case pc.t.consume <- rpc:
	case <-pc.done:
	case <-pc.t.shutdown:
	}
}

// heartbeat is the per-connection transport's heartbeat fast path: the
// RPC is checked, then given to raft's heartbeat handler (or its consumer
// while raft has set none).
func (pc *peerConn) heartbeat(rpc raft.RPC) {
	if !pc.admitRPC(rpc) {
		return
	}
	if fn := pc.t.hb.Load(); fn != nil {
		(*fn)(rpc)
		return
	}
	pc.deliver(rpc)
}

// oneConn is the stream layer of a peerConn's transport: it yields the one
// connection, then blocks until closed.
type oneConn struct {
	pc    *peerConn
	conn  net.Conn
	mu    sync.Mutex
	taken bool
}

func (o *oneConn) Accept() (net.Conn, error) {
	o.mu.Lock()
	taken := o.taken
	o.taken = true
	o.mu.Unlock()
	if !taken {
		return o.conn, nil
	}
	<-o.pc.done
	return nil, net.ErrClosed
}

// Close is called by the transport's Close, which peerConn.close calls.
func (o *oneConn) Close() error { return nil }

func (o *oneConn) Addr() net.Addr { return o.conn.LocalAddr() }

func (o *oneConn) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return nil, errors.New("an accepted raft connection does not dial")
}

// closeHook ends the peerConn when raft's connection handler closes the
// connection (the peer hung up, or sent what raft cannot decode).
type closeHook struct {
	net.Conn
	pc *peerConn
}

// Read ends the stream once the connection is refused: raft's reader then
// stops without logging an error.
func (c *closeHook) Read(b []byte) (int, error) {
	if c.pc.refused.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(b)
	if err != nil && c.pc.refused.Load() {
		return n, io.EOF
	}
	return n, err
}

func (c *closeHook) Close() error {
	c.pc.close()
	return nil
}
