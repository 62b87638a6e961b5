package api

import (
	"net/http"
	"strings"

	"github.com/policyrollout/reconciler/internal/auth"
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

// peerIdentity is the identity of a verified node on the node-to-node
// port acting for itself (no caller's credential attached) on a
// node-to-node route: the cluster endpoints and the webhook hand-off. It
// may do there what an admin may; everywhere else, and whenever a
// caller's credential travels with the request (a user request a
// follower forwarded), the credential decides.
func peerIdentity(r *http.Request, authorization string) (auth.Identity, bool) {
	id, ok := cluster.PeerFrom(r.Context())
	if !ok || authorization != "" {
		return auth.Identity{}, false
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, clusterPrefix) && p != WebhookCommandsPath {
		return auth.Identity{}, false
	}
	return auth.Identity{Name: "node " + id, Role: auth.RoleAdmin}, true
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
