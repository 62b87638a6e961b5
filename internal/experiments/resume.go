package experiments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// A commit operation is completed by the leader that pushed the commit,
// in a goroutine waiting for its generation (completeCommit). When that
// leader stops first, the next one would leave the operation running
// until pruneOperations fails it as orphaned, although the commit went
// live. So a leader, when its term starts and whenever the active or
// newest generation changes, completes the commit operations left
// running whose recorded commit (OperationMetadata.Commit) made a
// generation that is ACTIVE (or was: RETIRED) or INVALID, with the
// response the original leader would have written, one log entry each.
// A commit that never becomes a generation keeps the orphan fallback.

// commitOutcome is op completed for commit, which made generation g
// (Number, State, LeaderErrors): nil while g is neither active (now or
// before) nor INVALID.
func commitOutcome(op *preview.Operation, commit string, g raftstore.Generation, now time.Time) *preview.Operation {
	switch g.State {
	case raftstore.GenerationActive, raftstore.GenerationRetired:
		done, err := op.Succeed(nil, now)
		if err != nil {
			return nil
		}
		return done
	case raftstore.GenerationInvalid:
		return op.Fail(&preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"commit %s made generation %d, which is INVALID: %s", commit, g.Number,
			strings.Join(g.LeaderErrors, "; "))}, now)
	}
	return nil
}

// GenerationsKey changes whenever a generation is activated or a new one
// recorded (staged or INVALID): when a left commit may have an outcome.
// GenerationsKey is what ResumeCommits last scanned at.
type GenerationsKey struct{ active, highest uint64 }

// ResumeCommits completes the commit operations left running by an
// earlier leader whose generation has an outcome, unless the generations
// are as they were at the last complete scan (seen; the zero key of a new
// term always scans). It returns the key to pass next time: seen again
// when a write failed, so the next call retries.
func (s *Service) ResumeCommits(ctx context.Context, seen *GenerationsKey) *GenerationsKey {
	st := s.cfg.Store.State()
	key := &GenerationsKey{active: st.Active, highest: st.Highest}
	if seen != nil && *seen == *key {
		return seen
	}
	for id, doc := range st.Operations {
		op, err := preview.DecodeOperation(doc.Data)
		if err != nil || op.Done {
			continue
		}
		if _, mine := s.commitWaits.Load(op.Name); mine {
			continue // this node's completeCommit still waits for it
		}
		done, g := s.leftCommitOutcome(st, op, s.cfg.Now())
		if done == nil {
			continue
		}
		stored, err := s.completeIfRunning(ctx, done)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("cannot complete a commit operation left by an earlier leader; later", "operation", id, "error", err)
			}
			return seen
		}
		if !stored {
			continue // cancelled or completed meanwhile
		}
		s.log.Info("commit operation left by an earlier leader completed", "operation", op.Name,
			"target", op.Metadata.Target, "generation", g.Number, "state", g.State)
	}
	return key
}

// leftCommitOutcome is running commit operation op completed from the
// generation of its recorded commit in st, and that generation; nil when
// op is no commit, records none, or its generation has no outcome yet.
func (s *Service) leftCommitOutcome(st *raftstore.State, op *preview.Operation, now time.Time) (*preview.Operation, raftstore.Generation) {
	if op.Metadata.Verb != string(preview.MethodCommit) || op.Metadata.Commit == "" {
		return nil, raftstore.Generation{}
	}
	if s.cfg.Leader == nil {
		return nil, raftstore.Generation{}
	}
	g, ok := s.cfg.Leader.GenerationOf(st, op.Metadata.Commit)
	if !ok {
		return nil, g
	}
	return commitOutcome(op, op.Metadata.Commit, g, now), g
}

// completeLeft, on a pass, completes running op when its commit is live:
// its generation has an outcome (leftCommitOutcome), or the active
// generation's commit descends from it (a generation superseded by a
// newer commit, which took it along; checked in the leader's clone).
// An orphaned op (running past the commit wait plus orphanGrace) is
// completed anyway, as UNAVAILABLE when nothing tells. An op this
// node's completeCommit still waits for is left to it.
func (s *Service) completeLeft(ctx context.Context, st *raftstore.State, op *preview.Operation, now time.Time, orphaned bool) error {
	if _, mine := s.commitWaits.Load(op.Name); mine && !orphaned {
		return nil
	}
	done, _ := s.leftCommitOutcome(st, op, now)
	if done == nil && s.cfg.Leader != nil && s.cfg.Leader.LiveAncestor(st, op.Metadata.Commit) {
		done, _ = op.Succeed(nil, now)
	}
	switch {
	case done != nil:
		s.log.Info("commit operation left by an earlier leader completed", "operation", op.Name, "target", op.Metadata.Target)
	case !orphaned:
		return nil
	default:
		done = op.Fail(&preview.Error{Code: preview.Unavailable, Msg: "the leader running this operation " +
			"stopped before it completed; GET /v1/status shows whether its generation is active"}, now)
		s.log.Warn("operation left running by an earlier leader failed", "operation", op.Name, "target", op.Metadata.Target)
	}
	err := s.records.putOperationOver(ctx, done, st.Operations[strings.TrimPrefix(op.Name, "operations/")])
	if errors.Is(err, raftstore.ErrConflict) {
		return nil // cancelled or completed since st was read
	}
	return err
}
