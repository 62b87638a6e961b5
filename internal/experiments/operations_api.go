package experiments

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// The AIP-151 methods on operations that change them: cancel and delete.
// Both are decided here, on the leader, and proposed to raft, so every
// node sees the same outcome. opMu orders them with the completion of a
// commit operation (completeIfRunning), so that a cancelled operation is
// never completed afterwards, nor a completed one cancelled.

// operation reads operation id from the replicated state, with the
// stored document it decoded (what a conditional write replaces).
func (s *Service) operation(id string) (*preview.Operation, raftstore.Operation, error) {
	doc, ok := s.cfg.Store.State().Operations[id]
	if !ok || id == "" {
		return nil, doc, &preview.Error{Code: preview.NotFound, Msg: fmt.Sprintf("operation %q not found", "operations/"+id)}
	}
	op, err := preview.DecodeOperation(doc.Data)
	if err != nil {
		return nil, doc, fmt.Errorf("operation %s: %w", id, err)
	}
	return op, doc, nil
}

// CancelOperation cancels a running operation: it becomes done with the
// error CANCELLED. What it already did stays (a pushed commit goes live).
// A done operation is FAILED_PRECONDITION.
func (s *Service) CancelOperation(ctx context.Context, name string) (*preview.Operation, error) {
	if err := s.leaderCheck(); err != nil {
		return nil, err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	op, doc, err := s.operation(strings.TrimPrefix(name, "operations/"))
	if err != nil {
		return nil, err
	}
	if op.Done {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"%s is already done: there is nothing to cancel", op.Name)}
	}
	c := op.Cancel(s.cfg.Now())
	if err := s.records.putOperationOver(ctx, c, doc); errors.Is(err, raftstore.ErrConflict) {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"%s changed while it was being cancelled (another leader completed it): read it again", op.Name)}
	} else if err != nil {
		return nil, err
	}
	s.log.Info("operation cancelled", "operation", op.Name, "target", op.Metadata.Target, "commit", op.Metadata.Commit)
	return c, nil
}

// DeleteOperation forgets a done operation (its outcome is no longer of
// interest). A running one is FAILED_PRECONDITION: cancel it first, or
// its completion would have nowhere to go.
func (s *Service) DeleteOperation(ctx context.Context, name string) error {
	if err := s.leaderCheck(); err != nil {
		return err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	op, _, err := s.operation(strings.TrimPrefix(name, "operations/"))
	if err != nil {
		return err
	}
	if !op.Done {
		return &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"%s is still running: cancel it (POST /v1/%s:cancel) or wait for it first", op.Name, op.Name)}
	}
	return s.records.propose(ctx, "deleting "+op.Name, &raftstore.DeleteOperation{ID: strings.TrimPrefix(op.Name, "operations/")})
}

// completeIfRunning stores done unless its operation is already done (a
// client cancelled it, or another leader completed it). It reports
// whether it stored it. opMu orders this leader's own writes; the
// conditional write (once the cluster allows it) also loses cleanly to
// another leader's cancel that reached the log after the read.
func (s *Service) completeIfRunning(ctx context.Context, done *preview.Operation) (bool, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	cur, doc, err := s.operation(strings.TrimPrefix(done.Name, "operations/"))
	switch {
	case err != nil:
		return true, s.records.putOperation(ctx, done)
	case cur.Done:
		return false, nil
	}
	if err := s.records.putOperationOver(ctx, done, doc); errors.Is(err, raftstore.ErrConflict) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}
