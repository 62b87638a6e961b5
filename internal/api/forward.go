package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// maxForwardedAnswer bounds what is read of the leader's answer.
const maxForwardedAnswer = 4 << 20

// appliedIndexHeader carries, on the leader's answer to a forwarded
// request, the raft index its state had reached once the work was done.
// The forwarding node waits until it has applied that index too (at most
// until the request's deadline or maxCatchUp), so that a client reading
// from the node it wrote through sees its write: one logical write is one
// log entry, which a follower may apply a moment after the leader.
const appliedIndexHeader = "X-Reconciler-Applied-Index"

// maxCatchUp bounds that wait: a follower cut off from the leader answers
// anyway, as it did before.
const maxCatchUp = 2 * time.Second

// leaderAddr is the base URL of the leader for node-to-node calls when it
// is another node (cluster.Cluster.LeaderURL: its raft port over mutual
// TLS when [tls] is configured).
func (s *Server) leaderAddr() (string, bool) { return s.cluster.LeaderURL() }

// forward sends a request that only the leader can serve to the same path
// on the leader, marked with cluster.ForwardedHeader so that it is never
// forwarded again, and copies the answer (status, AIP-193 error included)
// back to the client. It is for API calls whose work is not a raft command
// (the cluster layer forwards those); the deadline is the caller's. The
// caller's own credential goes along, for the leader to check.
func (s *Server) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, base string, body []byte) {
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.fail(w, r, errorf(kindInternal, "forward: %v", err))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cluster.ForwardedHeader, s.cluster.NodeID())
	// The caller's own credential goes on: the leader checks its role
	// again (every node holds the same tokens).
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := s.fwdClient.Do(req)
	if err != nil {
		s.fail(w, r, errorf(kindUnavailable, "forwarding to the leader at %s failed: %v", base, cluster.TransportCause(err)))
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer))
	if err != nil {
		s.fail(w, r, errorf(kindUnavailable, "reading the leader's answer from %s: %v", base, err))
		return
	}
	if idx, err := strconv.ParseUint(resp.Header.Get(appliedIndexHeader), 10, 64); err == nil {
		s.catchUp(ctx, idx)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}

// catchUp waits, bounded, until this node has applied index.
func (s *Server) catchUp(ctx context.Context, index uint64) {
	ctx, cancel := context.WithTimeout(ctx, maxCatchUp)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.cluster.State().LastIndex < index {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// leaderOnly runs work only the leader can do: here when this node leads,
// and otherwise forwarded (once) to the leader, waiting up to leaderWait
// for one to exist. It writes the answer: run's value, its error, or the
// leader's answer. raw is the request body sent on when forwarding.
func (s *Server) leaderOnly(ctx context.Context, w http.ResponseWriter, r *http.Request, raw []byte,
	run func(context.Context) (any, error)) {
	forwarded := r.Header.Get(cluster.ForwardedHeader) != ""
	deadline := time.Now().Add(leaderWait)
	for {
		v, err := run(ctx)
		switch {
		case err == nil:
			if forwarded {
				w.Header().Set(appliedIndexHeader, strconv.FormatUint(s.cluster.State().LastIndex, 10))
			}
			s.writeValue(w, r, v)
			return
		case !errors.Is(err, raftstore.ErrNotLeader) || forwarded:
			s.fail(w, r, err)
			return
		}
		if addr, ok := s.leaderAddr(); ok {
			s.forward(ctx, w, r, addr, raw)
			return
		}
		if time.Now().After(deadline) {
			s.fail(w, r, err)
			return
		}
		select {
		case <-ctx.Done():
			s.fail(w, r, err)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
