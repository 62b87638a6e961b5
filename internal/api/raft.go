package api

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
)

// The raft operator endpoints: the leader's raft configuration, a
// leadership transfer and the removal of a dead voter. All three are
// admin-only (the peer list shows every node's raft address) and run on
// the leader through leaderOnly, whose configuration is the one that
// counts; bodies are the small strict JSON of decodeJSON.
const (
	raftPeersPath    = "/v1/raft/peers"
	raftVerbPrefix   = "/v1/raft:"
	raftTransferVerb = "transferLeadership"
	raftRemoveVerb   = "removePeer"
)

// RaftAdmin is what the raft endpoints need from the cluster layer; each
// method answers raftstore.ErrNotLeader off the leader.
type RaftAdmin interface {
	RaftPeers(ctx context.Context) (cluster.RaftPeersResponse, error)
	TransferLeadership(ctx context.Context, req cluster.TransferRequest) (cluster.TransferResponse, error)
	RemovePeer(ctx context.Context, req cluster.RemovePeerRequest) error
}

var _ RaftAdmin = (*cluster.Cluster)(nil)

// routeRaft handles GET /v1/raft/peers and POST /v1/raft:{verb}.
func (s *nodes) routeRaft(w http.ResponseWriter, r *http.Request, p string) {
	ra := s.raft
	if ra == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	method := http.MethodPost
	if p == raftPeersPath {
		method = http.MethodGet
	}
	if !s.allow(w, r, method) || !s.admit(w, r) {
		return
	}
	ctx := cluster.WithCredential(r.Context(), r.Header.Get("Authorization"))
	switch p {
	case raftPeersPath:
		s.leaderOnly(ctx, w, r, nil, func(ctx context.Context) (any, error) { return ra.RaftPeers(ctx) })
	case raftVerbPrefix + raftTransferVerb:
		var req cluster.TransferRequest
		raw, err := s.decodeRaw(w, r, &req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.leaderOnly(ctx, w, r, raw, func(ctx context.Context) (any, error) { return ra.TransferLeadership(ctx, req) })
	case raftVerbPrefix + raftRemoveVerb:
		var req cluster.RemovePeerRequest
		raw, err := s.decodeRaw(w, r, &req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.leaderOnly(ctx, w, r, raw, func(ctx context.Context) (any, error) {
			return struct{}{}, ra.RemovePeer(ctx, req)
		})
	default:
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s: use %s, %s%s or %s%s", r.URL.Path,
			raftPeersPath, raftVerbPrefix, raftTransferVerb, raftVerbPrefix, raftRemoveVerb))
	}
}

// decodeRaw reads a bounded body strictly into v and returns it as read,
// to forward unchanged.
func (s *nodes) decodeRaw(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	raw, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	return raw, decodeStrict(raw, v)
}
