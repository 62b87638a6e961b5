package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// forwardedContext marks ctx when r was forwarded by another node, so the
// cluster layer never forwards it again.
func (s *core) forwardedContext(ctx context.Context, r *http.Request) context.Context {
	if s.forwardedByNode(r) {
		return cluster.WithForwarded(ctx)
	}
	return ctx
}

// forwardedByNode reports whether r carries the forwarded mark of a node.
// With [tls] a node forwards on the node port with its certificate, so
// the mark counts only there: a client setting it on the API port would
// otherwise be answered NOT_LEADER by a follower, and have the leader
// append a raft barrier and report its index. Without [tls] nothing
// proves who sent it (docs/security.md says so).
func (s *core) forwardedByNode(r *http.Request) bool {
	if r.Header.Get(cluster.ForwardedHeader) == "" {
		return false
	}
	_, node := peerConn(r)
	return node || !s.peerTLS
}

// callOf is r as a call the leader can serve, with body raw and the
// caller's own credential: the leader checks its role again (every node
// holds the same tokens).
func callOf(r *http.Request, raw []byte) cluster.Call {
	return cluster.Call{Method: r.Method, Path: r.URL.RequestURI(), Body: raw,
		Caller: true, Authorization: r.Header.Get("Authorization")}
}

// writeAnswer copies the leader's answer (status, AIP-193 error
// included) back to the client.
func writeAnswer(w http.ResponseWriter, a *cluster.Answer) {
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// leaderOnly runs work only the leader can do through the cluster's one
// forwarder (cluster.OnLeader): here when this node leads, otherwise
// forwarded once to the leader, waiting up to leaderWait for one to
// exist. It writes the answer: run's value, its error, or the leader's
// answer. raw is the request body sent on when forwarding.
//
// The leader's answer to a forwarded write carries the raft index its
// state had reached (reportApplied), and OnLeader returns only once this
// node applied that index too, so that a client reads its write back
// from the node it wrote through.
func (s *core) leaderOnly(ctx context.Context, w http.ResponseWriter, r *http.Request, raw []byte,
	run func(context.Context) (any, error)) {
	var v any
	ctx = s.forwardedContext(ctx, r)
	since := s.leader.State().LastIndex
	a, err := s.leader.OnLeader(ctx, leaderWait, func(ctx context.Context) error {
		var err error
		v, err = run(ctx)
		return err
	}, callOf(r, raw))
	switch {
	case err != nil:
		if !errors.Is(err, raftstore.ErrNotLeader) {
			// A write that failed halfway (a changeState stops at the
			// node that failed) is visible as far as it got.
			reportApplied(ctx, w, s.leader, since)
		}
		s.fail(w, r, err)
	case a != nil:
		writeAnswer(w, a)
	default:
		reportApplied(ctx, w, s.leader, since)
		s.writeValue(w, r, v)
	}
}

// forwardedWriter is the leader's side of read-your-writes through a
// follower (cluster.Cluster.ForwardedWriteDone).
type forwardedWriter interface {
	ForwardedWriteDone(since uint64) uint64
}

// reportApplied tells the node that forwarded a write (ctx serves a
// forwarded request) the raft index this node's state reached once the
// write was done (cluster.AppliedIndexHeader), for it to wait to have
// applied it too before it answers its client; since is this node's
// index before the write. Call it before writing the answer.
func reportApplied(ctx context.Context, w http.ResponseWriter, c forwardedWriter, since uint64) {
	if cluster.IsForwarded(ctx) {
		w.Header().Set(cluster.AppliedIndexHeader, strconv.FormatUint(c.ForwardedWriteDone(since), 10))
	}
}
