package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// peerTLS is a node's mutual TLS ([tls]): its certificate, and the raft
// port, which carries raft and the node-to-node HTTP API split by ALPN.
type peerTLS struct {
	node   *tlsconfig.Node
	mux    *tlsconfig.Mux
	http   *http.Server
	served chan struct{}
}

// openTLS loads [tls] and listens on the raft port; it does nothing
// without [tls]. The certificate must name node.id: peers check it.
func (m *Main) openTLS() error {
	c := m.Config
	if !c.TLS.Enabled() {
		return nil
	}
	n, err := tlsconfig.NewNode(tlsconfig.Config{
		Files:    tlsconfig.Files{CA: c.TLS.CAFile, Cert: c.TLS.CertFile, Key: c.TLS.KeyFile},
		DenyFile: c.TLS.DenylistFile,
		Logger:   m.Logger.Named(logging.TLS),
	})
	if err != nil {
		return fmt.Errorf("[tls]: %w", err)
	}
	if n.ID() != c.Node.ID {
		return fmt.Errorf("[tls]: %s names node %q, but node.id is %q: other nodes would refuse it",
			c.TLS.CertFile, n.ID(), c.Node.ID)
	}
	logCertificate(m.Logger.Named(logging.TLS), n.Current())
	ln, err := net.Listen("tcp", c.Node.RaftAddr)
	if err != nil {
		return fmt.Errorf("listen on node.raft_addr: %w", err)
	}
	m.tls = &peerTLS{node: n, mux: tlsconfig.NewMux(ln, n, m.Logger.Named(logging.TLS))}
	return nil
}

// certWarning is how long before its expiry a node certificate is
// reported at warn level at start.
const certWarning = 30 * 24 * time.Hour

// logCertificate says at start which identity the node presents and
// until when, loudly when that is soon: an expired certificate cuts the
// node off from the cluster.
func logCertificate(log hclog.Logger, m *tlsconfig.Material) {
	if left := time.Until(m.NotAfter); left < certWarning {
		log.Warn("the node certificate expires soon: issue a new one (reconciler certs node); it is reloaded without a restart",
			"node_id", m.ID, "not_after", m.NotAfter)
		return
	}
	log.Info("node-to-node TLS", "node_id", m.ID, "not_after", m.NotAfter)
}

// streamLayer is raft's transport over the TLS port, nil without [tls].
func (m *Main) streamLayer() (raft.StreamLayer, error) {
	if m.tls == nil {
		return nil, nil
	}
	var advertise net.Addr
	if a := m.Config.Node.RaftAdvertiseAddr; a != "" {
		// Kept as written, a name unresolved: peers dial it, so a pod
		// whose IP changes on restart keeps its raft address (a stable
		// DNS name), and the name need not resolve yet at start.
		advertise = advertisedAddr(a)
	}
	n := m.tls.node
	return raftstore.NewIdentityStreamLayer(m.tls.mux.Listener(tlsconfig.ProtoRaft), advertise, raftstore.Identity{
		PeerID: tlsconfig.ConnPeerID,
		Dial: func(ctx context.Context, addr, id string) (net.Conn, error) {
			return n.Dial(ctx, addr, tlsconfig.ProtoRaft, id)
		},
	}), nil
}

// peerClient is the client of node-to-node HTTP calls: mutual TLS with
// [tls], plain HTTP without. timeout 0 means each call's own deadline.
func (m *Main) peerClient(timeout time.Duration) *http.Client {
	if m.tls == nil {
		return &http.Client{Timeout: timeout,
			Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Minute}}
	}
	return &http.Client{Timeout: timeout, Transport: m.tls.node.HTTPTransport()}
}

// probe checks a joining node before it enters the raft configuration: it
// must answer a raft RPC and, with [tls], prove that it is id. The RPC
// names this node, whose certificate the joining node checks it against.
func (m *Main) probe(_ context.Context, id, addr string) error {
	dial := raftstore.TCPDial
	if m.tls != nil {
		n := m.tls.node
		dial = func(ctx context.Context, a string) (net.Conn, error) {
			return n.Dial(ctx, a, tlsconfig.ProtoRaft, id)
		}
	}
	return raftstore.ProbeAs(dial, m.Config.Node.ID, addr, cluster.DefaultDialTimeout)
}

// startPeerHTTP serves the node-to-node HTTP API on the TLS port.
func (m *Main) startPeerHTTP() {
	if m.tls == nil {
		return
	}
	m.tls.http = &http.Server{
		Handler:           m.api.PeerHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          m.Logger.Named(logging.TLS).StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	m.tls.served = make(chan struct{})
	go func() {
		defer close(m.tls.served)
		_ = m.tls.http.Serve(m.tls.mux.Listener(tlsconfig.ProtoHTTP))
	}()
}

// stopPeerHTTP stops the node-to-node HTTP API within ctx.
func (m *Main) stopPeerHTTP(ctx context.Context) error {
	if m.tls == nil || m.tls.http == nil {
		return nil
	}
	err := m.tls.http.Shutdown(ctx)
	if err != nil {
		_ = m.tls.http.Close()
	}
	<-m.tls.served
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// closeTLS closes the raft port, after raft has stopped.
func (m *Main) closeTLS() {
	if m.tls != nil {
		_ = m.tls.mux.Close()
	}
}

// advertisedAddr is node.raft_advertise_addr as configured (host:port,
// the host possibly a DNS name), the address raft records for this node.
type advertisedAddr string

// Network implements net.Addr.
func (advertisedAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a advertisedAddr) String() string { return string(a) }
