package cluster

import (
	"fmt"
	"net/http"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// LeaderElsewhere is a follower's answer to another node's own call (a
// join, heartbeat, report, leave or reconcile on its certificate alone):
// the follower does not relay it, which would bring it to the leader
// under the follower's certificate, where it would speak for the wrong
// node. It points the caller to the leader's node-to-node port instead
// (the API answers 307 with a Location there), and the caller's client
// follows once (FollowLeader), presenting its own certificate to the
// leader. It wraps raftstore.ErrNotLeader: a caller that does not follow
// retries as for any NOT_LEADER.
type LeaderElsewhere struct {
	// ID and Addr are the leader's node id and node-to-node address.
	ID, Addr string
}

func (e *LeaderElsewhere) Error() string {
	return fmt.Sprintf("%v: node %s leads; call it on its node-to-node port %s", raftstore.ErrNotLeader, e.ID, e.Addr)
}

// Unwrap makes a LeaderElsewhere match raftstore.ErrNotLeader.
func (e *LeaderElsewhere) Unwrap() error { return raftstore.ErrNotLeader }

// leaderElsewhere is the answer to another node's own call on a node that
// does not lead: where the leader is, or ErrNoLeader when it is not known.
func (f *forwarder) leaderElsewhere() error {
	id, addr := f.store.Leader()
	if id == "" || id == f.self || addr == "" {
		return fmt.Errorf("%w (asked by another node on %s)", ErrNoLeader, f.self)
	}
	return &LeaderElsewhere{ID: id, Addr: addr}
}

// maxLeaderRedirects is how many LeaderElsewhere pointers one call
// follows: one, from a member to the leader it knows. A second would be a
// leader change in between; the call's retry handles that.
const maxLeaderRedirects = 1

// FollowLeader is the redirect policy of node-to-node clients: a node's
// own call follows one redirect (a LeaderElsewhere) to an https address;
// a call that carries a caller's credential follows none, so a
// credential is only ever sent where this node chose to send it.
// Refused redirects leave the 307 as the answer, which decodes as
// NOT_LEADER and is retried.
func FollowLeader(req *http.Request, via []*http.Request) error {
	if len(via) > maxLeaderRedirects || req.URL.Scheme != "https" || via[0].Header.Get("Authorization") != "" {
		return http.ErrUseLastResponse
	}
	return nil
}
