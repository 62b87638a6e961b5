package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// The node-to-node port's authority (docs/security.md, "Node-to-node
// calls"). A node certificate is never an admin: alone (no Authorization
// header) it authorises the calls in nodeCalls, each about the node
// itself (the cluster layer checks which node a body names); anything
// else on that port needs the caller's own credential, which a follower
// forwards with the user's request and which is checked as on the API
// port. No header names a node: the certificate alone does.

// peerConnKey carries the verified node id of a node-port connection.
type peerConnKey struct{}

// PeerHandler serves the node-to-node HTTP API: the connections that
// tlsconfig.Mux hands over from the raft port, each from a node whose
// certificate chains to the cluster CA. It serves only the API's own
// routes (no decisions, probes or webhooks), and marks a request that
// carries no caller's credential as the node's own call
// (cluster.WithPeer), for the cluster layer to accept only about that
// node.
func (s *Server) PeerHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := tlsconfig.PeerID(r.TLS)
		if err != nil {
			s.fail(w, r, errorf(errs.PermissionDenied, "node-to-node endpoint: %v", err))
			return
		}
		if routeFor(r).class != classAPI {
			s.fail(w, r, errorf(errs.NotFound, "%s is not served on the node-to-node port: call the node's API address", r.URL.Path))
			return
		}
		ctx := context.WithValue(r.Context(), peerConnKey{}, id)
		if r.Header.Get("Authorization") == "" {
			ctx = cluster.WithPeer(ctx, id)
		}
		s.ServeHTTP(w, r.WithContext(ctx))
	})
}

// peerConn is the verified node a request came from on the node port.
func peerConn(r *http.Request) (string, bool) {
	id, ok := r.Context().Value(peerConnKey{}).(string)
	return id, ok && id != ""
}

// nodeCaller reports whether r is a node's own call: on the node port,
// without a caller's credential.
func nodeCaller(r *http.Request) (string, bool) {
	id, ok := peerConn(r)
	return id, ok && r.Header.Get("Authorization") == ""
}

// nodeCall is what a node certificate alone may call on one path.
type nodeCall struct {
	// stranger: a node that is not a member may call it (its own join).
	stranger bool
	// leaderOnly: only the node this node knows as leader may call it.
	leaderOnly bool
}

// nodeCalls are the calls a node certificate alone authorises (POST).
// Join, leave, heartbeat and propose must name the calling node itself
// (cluster layer: checkOwn, checkSpeaker); reconcile and the webhook
// hand-off only ask the leader to read git or re-read a comment from
// GitHub, which any member's webhook may; selfCheck is the leader asking
// for a node's health.
var nodeCalls = map[string]nodeCall{
	cluster.PathJoin:      {stranger: true},
	cluster.PathLeave:     {},
	cluster.PathHeartbeat: {},
	cluster.PathPropose:   {},
	cluster.PathReconcile: {},
	cluster.PathSelfCheck: {leaderOnly: true},
	WebhookCommandsPath:   {},
}

// authenticatePeer is authenticate for the node port: a node's own call,
// or a forwarded request judged by its caller's credential, from a
// member only. need is the role the route needs.
func (s *Server) authenticatePeer(r *http.Request, peer string, need auth.Role) (auth.Identity, error) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return s.nodeIdentity(r, peer)
	}
	if s.cluster == nil || !s.cluster.IsMember(peer) {
		return auth.Identity{}, errNotMember(peer)
	}
	if s.creds.Empty() {
		return auth.Identity{}, errorf(errs.Unauthenticated,
			"this node's API has no credentials, so a request forwarded over the node-to-node port cannot be checked: send it to the leader, or configure [api] token_env or [[api.tokens]] on every node")
	}
	return s.byCredential(header, need)
}

// nodeIdentity is the identity of a node's own call: "node <id>", with no
// role, admitted only on the paths of nodeCalls.
func (s *Server) nodeIdentity(r *http.Request, peer string) (auth.Identity, error) {
	id := auth.Identity{Name: "node " + peer}
	call, ok := nodeCalls[r.URL.Path]
	switch {
	case !ok || r.Method != http.MethodPost || s.cluster == nil:
		return id, errorf(errs.PermissionDenied,
			"%s %s needs a caller's credential: a node certificate alone authorises only a node's own calls about itself (join, leave, heartbeat, reports), reconcile and the webhook hand-off",
			r.Method, r.URL.Path)
	case !call.stranger && !s.cluster.IsMember(peer):
		return id, errNotMember(peer)
	case call.leaderOnly && s.cluster.Leader() != peer:
		return id, errorf(errs.PermissionDenied, "only the leader asks a node for its health; node %s is not the leader here (%q is)",
			peer, s.cluster.Leader())
	}
	return id, nil
}

func errNotMember(peer string) error {
	return errorf(errs.PermissionDenied,
		"node %s is not a member of this cluster: its certificate may only ask to join (POST %s with its own id)", peer, cluster.PathJoin)
}

// fromPeer refuses, when nodes talk over mutual TLS, a node-only request
// that is not a node's own call on the node-to-node port; it answers and
// reports false.
func (s *core) fromPeer(w http.ResponseWriter, r *http.Request) bool {
	if !s.peerTLS {
		return true
	}
	if _, ok := nodeCaller(r); ok {
		return true
	}
	s.fail(w, r, errorf(errs.PermissionDenied,
		"%s is a node-to-node endpoint: nodes call it on each other's raft port with their certificate and no Authorization header", r.URL.Path))
	return false
}

// redirectToLeader answers a cluster.LeaderElsewhere: 307 to the same
// path on the leader's node port, where the node that called presents
// its own certificate. It reports whether it answered.
func (s *core) redirectToLeader(w http.ResponseWriter, r *http.Request, err error) bool {
	var le *cluster.LeaderElsewhere
	if !errors.As(err, &le) {
		return false
	}
	w.Header().Set("Location", "https://"+le.Addr+r.URL.RequestURI())
	writeError(w, http.StatusTemporaryRedirect, errs.Unavailable.String(), le.Error(), cluster.Reason(err))
	return true
}
