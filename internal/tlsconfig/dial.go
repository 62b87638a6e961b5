package tlsconfig

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Dial connects to another node's port for proto and completes the
// handshake; wantID, when not empty, is the node the certificate must name.
func (n *Node) Dial(ctx context.Context, addr, proto, wantID string) (net.Conn, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: n.ClientConfig(proto, wantID)}
	return d.DialContext(ctx, "tcp", addr)
}

// HTTPTransport is the client transport of node-to-node HTTP calls: mutual
// TLS to other nodes' raft ports with ProtoHTTP. It opens at most
// maxPeerHTTPConns connections to one node (more calls wait for one), so
// a node stays under the per-node bound of the port it calls.
func (n *Node) HTTPTransport() *http.Transport {
	return &http.Transport{
		TLSClientConfig:     n.ClientConfig(ProtoHTTP, ""),
		TLSHandshakeTimeout: DefaultHandshakeTimeout,
		MaxConnsPerHost:     maxPeerHTTPConns,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     time.Minute,
	}
}
