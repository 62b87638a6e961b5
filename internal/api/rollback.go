package api

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/rollback"
)

// Rollbacker runs a rollback where the leader loop runs
// (internal/reconcile); elsewhere it answers raftstore.ErrNotLeader and
// the API forwards.
type Rollbacker interface {
	Rollback(ctx context.Context, req RollbackRequest) (RollbackResult, error)
}

// RollbackRequest and RollbackResult are the rollback package's: the
// leader loop answers in the same words.
type (
	RollbackRequest = rollback.Request
	RollbackResult  = rollback.Result
)

// rollbackPath is the custom method on the generations collection.
const rollbackPath = generationsList + ":rollback"

// Bounds of the wait for the revert to become active.
const (
	defaultRollbackWait = 30 * time.Second
	maxRollbackWait     = 5 * time.Minute
	// rollbackGitBudget is what a rollback may spend besides its wait:
	// a fetch and a push (each under git.timeout) and the forward hop.
	rollbackGitBudget = 2 * time.Minute
	// leaderWait bounds how long a request waits for a leader to exist.
	leaderWait = 5 * time.Second
)

// rollbackBody is the body of POST /v1/generations:rollback.
type rollbackBody struct {
	// Generation to restore; 0 or absent: the one before the active one.
	Generation uint64 `json:"generation"`
	// WaitSeconds bounds the wait for the new generation to be ACTIVE;
	// absent: 30; 0: answer right after the push.
	WaitSeconds *float64 `json:"waitSeconds"`
}

// rollback answers POST /v1/generations:rollback (CONTRACT.md §2, §5): the
// leader writes and pushes the revert commit and, by default, waits for
// it to become the active generation. Followers forward it.
func (s *clusterAPI) rollback(w http.ResponseWriter, r *http.Request) {
	if s.cluster == nil || s.rollbacker == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	var body rollbackBody
	raw, ok := s.adminPost(w, r, &body)
	if !ok {
		return
	}
	req, err := body.request()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if id, ok := identityOf(r); ok {
		// Recorded in the revert commit, hence in the generation's
		// history: the credential's name and role, as the audit log.
		req.RequestedBy = id.Name + " (" + id.Role.String() + ")"
	}
	s.runRollback(w, r, raw, req)
}

// request checks the body and turns it into a reconcile request.
func (b rollbackBody) request() (RollbackRequest, error) {
	wait := defaultRollbackWait
	if b.WaitSeconds != nil {
		ws := *b.WaitSeconds
		if math.IsNaN(ws) || ws < 0 || ws > maxRollbackWait.Seconds() {
			return RollbackRequest{}, errorf(errs.InvalidArgument, "waitSeconds must be between 0 and %.0f", maxRollbackWait.Seconds())
		}
		wait = time.Duration(ws * float64(time.Second))
	}
	return RollbackRequest{Generation: b.Generation, Wait: wait}, nil
}

// runRollback runs the rollback here when this node leads, and otherwise
// forwards it (once) to the leader, waiting a little for one to exist.
func (s *clusterAPI) runRollback(w http.ResponseWriter, r *http.Request, raw []byte, req RollbackRequest) {
	ctx, cancel := context.WithTimeout(r.Context(), req.Wait+rollbackGitBudget)
	defer cancel()
	s.leaderOnly(ctx, w, r, raw, func(ctx context.Context) (any, error) {
		res, err := s.rollbacker.Rollback(ctx, req)
		if err != nil {
			return nil, err
		}
		return toRollbackResource(res), nil
	})
}

func toRollbackResource(res RollbackResult) apiv1.Rollback {
	out := apiv1.Rollback{TargetGeneration: res.Target, TargetCommit: res.TargetCommit, Commit: res.Commit,
		Revision: res.Revision, Message: res.Message, Generation: res.Generation, Errors: res.Errors,
		PullRequestURL: res.PullRequestURL}
	if res.Generation != 0 {
		out.State = apiv1.GenerationState(res.State)
	}
	return out
}
