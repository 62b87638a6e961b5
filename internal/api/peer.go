package api

import (
	"net/http"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// PeerHandler serves the node-to-node HTTP API: the connections that
// tlsconfig.Mux hands over from the raft port, each from a node whose
// certificate chains to the cluster CA. It marks the request with that
// node's id (cluster.WithPeer), so that the cluster layer accepts a
// report, heartbeat or address change only from the node it names, and
// then routes it like any request: a user request a follower forwarded
// still carries, and is checked against, the caller's own credential.
func (s *Server) PeerHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := tlsconfig.PeerID(r.TLS)
		if err != nil {
			s.fail(w, r, errorf(kindPermissionDenied, "node-to-node endpoint: %v", err))
			return
		}
		ctx := cluster.WithPeer(r.Context(), id)
		if o := r.Header.Get(cluster.OriginHeader); o != "" {
			ctx = cluster.WithOrigin(ctx, o)
		}
		s.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admitNode admits a cluster request: a verified node on the node-to-node
// port acting for itself needs nothing more; a request that carries a
// caller's credential (a user request a follower forwarded) and any
// request from elsewhere need the API credential (admit).
func (s *Server) admitNode(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := cluster.PeerFrom(r.Context()); ok && r.Header.Get("Authorization") == "" {
		return true
	}
	return s.admit(w, r)
}

// fromPeer refuses, when nodes talk over mutual TLS, a node-only request
// that did not arrive on the node-to-node port; it answers and reports
// false.
func (s *Server) fromPeer(w http.ResponseWriter, r *http.Request) bool {
	if !s.peerTLS {
		return true
	}
	if _, ok := cluster.PeerFrom(r.Context()); ok {
		return true
	}
	s.fail(w, r, errorf(kindPermissionDenied,
		"%s is a node-to-node endpoint: nodes call it on each other's raft port with their certificate", r.URL.Path))
	return false
}
