package api

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/errs"
)

// HistoryAccepter lets the leader promote a live-branch head that does not
// descend from the active generation's commit (reconcile.Loop.AcceptHistory);
// elsewhere it answers raftstore.ErrNotLeader and the API forwards.
type HistoryAccepter interface {
	AcceptHistory(ctx context.Context, commit string) error
}

// acceptHistoryPath is the custom method that accepts a diverged history.
const acceptHistoryPath = generationsList + ":acceptHistory"

// acceptHistoryBody names the divergent head being accepted.
type acceptHistoryBody struct {
	Commit string `json:"commit"`
}

// acceptHistory answers POST /v1/generations:acceptHistory {"commit":…}:
// an operator's explicit acceptance of the history the status shows under
// source.diverged. The commit must be that head (FAILED_PRECONDITION
// otherwise); the answer is 200 {} and the normal promotion follows.
func (s *clusterAPI) acceptHistory(w http.ResponseWriter, r *http.Request) {
	acc, ok := s.rollbacker.(HistoryAccepter)
	if s.cluster == nil || !ok {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	var body acceptHistoryBody
	raw, ok := s.adminPost(w, r, &body)
	if !ok {
		return
	}
	if len(body.Commit) != 40 {
		s.fail(w, r, errorf(errs.InvalidArgument, "commit must be the full 40-hex-digit hash of the divergent head"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), rollbackGitBudget)
	defer cancel()
	s.leaderOnly(ctx, w, r, raw, func(ctx context.Context) (any, error) {
		return struct{}{}, acc.AcceptHistory(ctx, body.Commit)
	})
}
