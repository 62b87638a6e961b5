package raftstore

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/logging"
)

// sweepInterval is how often connections of nodes that left the
// configuration are closed. Every RPC is checked as it arrives anyway;
// the sweep only closes the idle ones.
const sweepInterval = 250 * time.Millisecond

// errRefused is all a refused peer is told; the log says why.
var errRefused = errors.New("raft RPC refused: see the receiving node's log")

// configSource is what the transport needs from raft: the configuration
// it knows now (*raft.Raft reads it from an atomic copy, without a round
// trip through raft's main loop).
type configSource interface {
	GetConfiguration() raft.ConfigurationFuture
}

// idTransport is raft's transport over a mutual-TLS stream layer that ties
// every RPC to the certificate of the connection that carries it.
// hashicorp/raft's NetworkTransport hands its consumer RPCs without the
// connection they came on, so each accepted connection gets a
// NetworkTransport of its own (raft's own decoder, no second parser of
// the wire format) whose RPCs are checked against the connection's node
// id and the current raft configuration before they reach raft's
// consumer channel. Outgoing RPCs go through one NetworkTransport whose
// dials ask for the certificate of the member at the address.
type idTransport struct {
	ln       net.Listener
	advert   net.Addr
	peerID   peerConnID
	dialID   func(ctx context.Context, addr, id string) (net.Conn, error)
	timeout  time.Duration
	rlog     hclog.Logger // raft's logger, for the per-connection transports
	log      hclog.Logger // refusals
	out      *raft.NetworkTransport
	consume  chan raft.RPC
	shutdown chan struct{}
	once     sync.Once
	src      atomic.Pointer[configSource]
	hb       atomic.Pointer[func(raft.RPC)]
	refusals *logging.Limiter

	mu    sync.Mutex
	conns map[*peerConn]struct{}
}

var (
	_ raft.Transport   = (*idTransport)(nil)
	_ raft.WithClose   = (*idTransport)(nil)
	_ raft.WithPreVote = (*idTransport)(nil)
)

// newIDTransport starts accepting on s's listener; setSource must follow
// once raft runs (until then every RPC is refused: the configuration is
// unknown).
func newIDTransport(s *StreamLayer, cfg Config) *idTransport {
	t := &idTransport{ln: s.Listener, advert: s.Addr(), peerID: s.identity.PeerID, dialID: s.identity.Dial,
		timeout: 10 * time.Second, rlog: cfg.Logger.Named(logging.Raft), log: cfg.Logger.Named(logging.TLS),
		consume: make(chan raft.RPC), shutdown: make(chan struct{}), refusals: logging.NewLimiter(1, time.Second),
		conns: map[*peerConn]struct{}{}}
	t.out = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &idDialer{t: t}, MaxPool: 3, Timeout: t.timeout, Logger: t.rlog,
	})
	go t.accept()
	go t.sweepLoop()
	return t
}

// setSource gives the transport raft's configuration.
func (t *idTransport) setSource(src configSource) { t.src.Store(&src) }

// servers is the configuration this node knows; ok is false before raft
// runs.
func (t *idTransport) servers() ([]raft.Server, bool) {
	p := t.src.Load()
	if p == nil {
		return nil, false
	}
	f := (*p).GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	return f.Configuration().Servers, true
}

func (t *idTransport) accept() {
	delay := 5 * time.Millisecond
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.closed() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(delay)
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		t.admitConn(conn)
	}
}

func (t *idTransport) closed() bool {
	select {
	case <-t.shutdown:
		return true
	default:
		return false
	}
}

// admitConn serves conn if its certificate names a node that may speak
// raft here, and refuses it otherwise.
func (t *idTransport) admitConn(conn net.Conn) {
	id, err := t.peerID(conn)
	if err == nil {
		servers, ok := t.servers()
		if !ok {
			err = errors.New("raft is not running yet")
		} else {
			err = admit(id, servers)
		}
	}
	if err != nil {
		_ = conn.Close()
		t.logRefusal(conn, id, err)
		return
	}
	pc := newPeerConn(t, id, conn)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed() {
		pc.stop()
		return
	}
	select {
	case <-pc.done: // refused already
	default:
		t.conns[pc] = struct{}{}
	}
}

// refuse ends pc and logs why.
func (t *idTransport) refuse(pc *peerConn, why error) {
	pc.stop()
	t.logRefusal(pc.conn, pc.id, why)
}

// logRefusal logs a refused connection or RPC, at most once a second with
// the count of the others, as the TLS port logs refused handshakes.
func (t *idTransport) logRefusal(conn net.Conn, id string, why error) {
	ok, others := t.refusals.Allow()
	if !ok {
		return
	}
	t.log.Warn("refused a raft connection: only current members of the raft configuration, speaking for the node their certificate names, may send raft RPCs",
		"remote", conn.RemoteAddr().String(), "certificate_node", id, "error", why, "others_refused", others)
}

// check returns why an RPC from pc is refused, nil when raft may see it.
func (t *idTransport) check(pc *peerConn, rpc raft.RPC) error {
	servers, ok := t.servers()
	if !ok {
		return errors.New("raft is not running")
	}
	return checkRPC(pc.id, rpc.Command, servers)
}

// sweepLoop closes the connections of nodes that left the configuration.
func (t *idTransport) sweepLoop() {
	tick := time.NewTicker(sweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.shutdown:
			return
		case <-tick.C:
			t.sweep()
		}
	}
}

func (t *idTransport) sweep() {
	servers, ok := t.servers()
	if !ok {
		return
	}
	var gone []*peerConn
	t.mu.Lock()
	for pc := range t.conns {
		if admit(pc.id, servers) != nil {
			gone = append(gone, pc)
		}
	}
	t.mu.Unlock()
	for _, pc := range gone {
		t.refuse(pc, errors.New("the node left the raft configuration: its connection is closed"))
	}
}

func (t *idTransport) forget(pc *peerConn) {
	t.mu.Lock()
	delete(t.conns, pc)
	t.mu.Unlock()
}

// Consumer implements raft.Transport: the RPCs that passed the checks.
func (t *idTransport) Consumer() <-chan raft.RPC { return t.consume }

// LocalAddr implements raft.Transport.
func (t *idTransport) LocalAddr() raft.ServerAddress { return raft.ServerAddress(t.advert.String()) }

// SetHeartbeatHandler implements raft.Transport; heartbeats are checked
// like every other RPC before the handler sees them.
func (t *idTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.hb.Store(nil)
		return
	}
	t.hb.Store(&cb)
}

// AppendEntriesPipeline implements raft.Transport.
func (t *idTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.out.AppendEntriesPipeline(id, target)
}

// AppendEntries implements raft.Transport.
func (t *idTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	return t.out.AppendEntries(id, target, args, resp)
}

// RequestVote implements raft.Transport.
func (t *idTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest,
	resp *raft.RequestVoteResponse) error {
	return t.out.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t *idTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest,
	resp *raft.RequestPreVoteResponse) error {
	return t.out.RequestPreVote(id, target, args, resp)
}

// InstallSnapshot implements raft.Transport.
func (t *idTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.out.InstallSnapshot(id, target, args, resp, data)
}

// TimeoutNow implements raft.Transport.
func (t *idTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest,
	resp *raft.TimeoutNowResponse) error {
	return t.out.TimeoutNow(id, target, args, resp)
}

// EncodePeer implements raft.Transport.
func (t *idTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return t.out.EncodePeer(id, addr)
}

// DecodePeer implements raft.Transport.
func (t *idTransport) DecodePeer(b []byte) raft.ServerAddress { return t.out.DecodePeer(b) }

// Close implements raft.WithClose: raft calls it on shutdown.
func (t *idTransport) Close() error {
	t.once.Do(func() {
		t.mu.Lock()
		close(t.shutdown)
		conns := make([]*peerConn, 0, len(t.conns))
		for pc := range t.conns {
			conns = append(conns, pc)
		}
		t.mu.Unlock()
		_ = t.ln.Close()
		_ = t.out.Close()
		for _, pc := range conns {
			pc.stop()
			pc.close() // an RPC raft took and will never answer holds its reader
		}
	})
	return nil
}

// idDialer is the outgoing transport's stream layer: it dials a member
// asking for the certificate of the node the configuration has at that
// address, so an address taken over by another node's certificate is
// refused.
type idDialer struct{ t *idTransport }

func (d *idDialer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	servers, _ := d.t.servers()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.t.dialID(ctx, string(addr), addrID(servers, string(addr)))
}

// Accept blocks until the transport closes: incoming connections are the
// idTransport's own.
func (d *idDialer) Accept() (net.Conn, error) {
	<-d.t.shutdown
	return nil, net.ErrClosed
}

func (d *idDialer) Close() error   { return nil }
func (d *idDialer) Addr() net.Addr { return d.t.advert }
