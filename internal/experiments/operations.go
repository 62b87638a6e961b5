package experiments

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Long-running operations live in the replicated state; the leader keeps
// them bounded (docs/api.md, "Operations").
const (
	// OperationRetention is how long a done operation stays readable.
	OperationRetention = 24 * time.Hour
	// MaxDoneOperations bounds the done operations kept; the oldest go first.
	MaxDoneOperations = 1000
	// pruneEvery spaces the leader's scans of the operations.
	pruneEvery = time.Minute
	// orphanGrace is added to the commit wait before an operation left
	// running by a leader that stopped is failed.
	orphanGrace = time.Minute
)

// PruneOperations, at most once per pruneEvery per term (last is when
// this term last scanned), deletes done
// operations older than OperationRetention and the oldest beyond
// MaxDoneOperations, and completes, as failed, operations nobody will
// complete: only a commit waits for its generation, in a goroutine of the
// leader that started it, so one still running long after the commit wait
// was left behind by a leader that stopped. A left commit that went live
// is completed sooner, from its commit (completeLeft). Failures wait for
// the next scan.
func (s *Service) PruneOperations(ctx context.Context, last *time.Time) {
	now := s.cfg.Now()
	if !last.IsZero() && now.Sub(*last) < pruneEvery {
		return
	}
	*last = now
	wait := s.cfg.CommitWait
	if wait <= 0 {
		wait = DefaultCommitWait
	}
	type doneOp struct {
		id  string
		end time.Time
	}
	var done []doneOp
	var drop []string
	st := s.cfg.Store.State()
	for id, doc := range st.Operations {
		op, err := preview.DecodeOperation(doc.Data)
		if err != nil {
			drop = append(drop, id) // unreadable: nobody can use it
			continue
		}
		switch {
		case op.Done && now.Sub(op.Metadata.EndTime) > OperationRetention:
			drop = append(drop, id)
		case op.Done:
			done = append(done, doneOp{id, op.Metadata.EndTime})
		default:
			if err := s.completeLeft(ctx, st, op, now, now.Sub(op.Metadata.CreateTime) > wait+orphanGrace); err != nil {
				s.log.Debug("cannot complete an orphaned operation; later", "operation", op.Name, "error", err)
				return
			}
		}
	}
	if excess := len(done) - MaxDoneOperations; excess > 0 {
		slices.SortFunc(done, func(a, b doneOp) int {
			if c := a.end.Compare(b.end); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		for _, d := range done[:excess] {
			drop = append(drop, d.id)
		}
	}
	slices.Sort(drop)
	for _, id := range drop {
		if _, err := s.cfg.Store.Propose(ctx, &raftstore.DeleteOperation{ID: id}); err != nil {
			s.log.Debug("cannot delete an operation; later", "operation", id, "error", err)
			return
		}
	}
	if len(drop) > 0 {
		s.log.Debug("operations pruned", "deleted", len(drop))
	}
}
