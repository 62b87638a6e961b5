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
	"github.com/policyrollout/reconciler/internal/config"
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

// nodePort is this node's side of node-to-node traffic: raft's transport,
// the client of node-to-node calls, the probe of joining nodes and the
// node-to-node HTTP API, all over mutual TLS with [tls] (tls), plainly
// without (tls nil).
type nodePort struct {
	self      string
	advertise string // node.raft_advertise_addr
	log       hclog.Logger
	tls       *peerTLS // nil without [tls]
}

// secure reports whether nodes talk over mutual TLS ([tls]).
func (p *nodePort) secure() bool { return p.tls != nil }

// openNodePort loads [tls] and listens on the raft port; without [tls] it
// only records who this node is. The certificate must name node.id: peers
// check it.
func openNodePort(c *config.Config, logger hclog.Logger) (*nodePort, error) {
	p := &nodePort{self: c.Node.ID, advertise: c.Node.RaftAdvertiseAddr, log: logger.Named(logging.TLS)}
	if !c.TLS.Enabled() {
		return p, nil
	}
	n, err := tlsconfig.NewNode(tlsconfig.Config{
		Files:    tlsconfig.Files{CA: c.TLS.CAFile, Cert: c.TLS.CertFile, Key: c.TLS.KeyFile},
		DenyFile: c.TLS.DenylistFile,
		Logger:   p.log,
	})
	if err != nil {
		return nil, fmt.Errorf("[tls]: %w", err)
	}
	if n.ID() != c.Node.ID {
		return nil, fmt.Errorf("[tls]: %s names node %q, but node.id is %q: other nodes would refuse it",
			c.TLS.CertFile, n.ID(), c.Node.ID)
	}
	logCertificate(p.log, n.Current())
	ln, err := net.Listen("tcp", c.Node.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on node.raft_addr: %w", err)
	}
	p.tls = &peerTLS{node: n, mux: tlsconfig.NewMux(ln, n, p.log)}
	return p, nil
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
func (p *nodePort) streamLayer() (raft.StreamLayer, error) {
	if p.tls == nil {
		return nil, nil
	}
	var advertise net.Addr
	if a := p.advertise; a != "" {
		// Kept as written, a name unresolved: peers dial it, so a pod
		// whose IP changes on restart keeps its raft address (a stable
		// DNS name), and the name need not resolve yet at start.
		advertise = advertisedAddr(a)
	}
	n := p.tls.node
	return raftstore.NewIdentityStreamLayer(p.tls.mux.Listener(tlsconfig.ProtoRaft), advertise, raftstore.Identity{
		PeerID: tlsconfig.ConnPeerID,
		Dial: func(ctx context.Context, addr, id string) (net.Conn, error) {
			return n.Dial(ctx, addr, tlsconfig.ProtoRaft, id)
		},
	}), nil
}

// peerClient is the client of node-to-node HTTP calls: mutual TLS with
// [tls], plain HTTP without. timeout 0 means each call's own deadline.
func (p *nodePort) peerClient(timeout time.Duration) *http.Client {
	if p.tls == nil {
		return &http.Client{Timeout: timeout,
			Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Minute}}
	}
	return &http.Client{Timeout: timeout, Transport: p.tls.node.HTTPTransport()}
}

// probe checks a joining node before it enters the raft configuration: it
// must answer a raft RPC and, with [tls], prove that it is id. The RPC
// names this node, whose certificate the joining node checks it against.
func (p *nodePort) probe(_ context.Context, id, addr string) error {
	dial := raftstore.TCPDial
	if p.tls != nil {
		n := p.tls.node
		dial = func(ctx context.Context, a string) (net.Conn, error) {
			return n.Dial(ctx, a, tlsconfig.ProtoRaft, id)
		}
	}
	return raftstore.ProbeAs(dial, p.self, addr, cluster.DefaultDialTimeout)
}

// startPeerHTTP serves the node-to-node HTTP API on the TLS port.
func (p *nodePort) startPeerHTTP(handler http.Handler) {
	if p.tls == nil {
		return
	}
	p.tls.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          p.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	p.tls.served = make(chan struct{})
	go func() {
		defer close(p.tls.served)
		_ = p.tls.http.Serve(p.tls.mux.Listener(tlsconfig.ProtoHTTP))
	}()
}

// stopPeerHTTP stops the node-to-node HTTP API within ctx.
func (p *nodePort) stopPeerHTTP(ctx context.Context) error {
	if p.tls == nil || p.tls.http == nil {
		return nil
	}
	err := p.tls.http.Shutdown(ctx)
	if err != nil {
		_ = p.tls.http.Close()
	}
	<-p.tls.served
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// closeTLS closes the raft port, after raft has stopped; nothing before
// the port was opened.
func (p *nodePort) closeTLS() {
	if p != nil && p.tls != nil {
		_ = p.tls.mux.Close()
	}
}

// advertisedAddr is node.raft_advertise_addr as configured (host:port,
// the host possibly a DNS name), the address raft records for this node.
type advertisedAddr string

// Network implements net.Addr.
func (advertisedAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a advertisedAddr) String() string { return string(a) }
