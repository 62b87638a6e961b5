package experiments

import (
	"context"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// waitingLeader is a Leader whose commit wait ends when release closes,
// with an ACTIVE generation; the rest of Leader is not used here.
type waitingLeader struct {
	Leader
	release chan struct{}
}

func (l *waitingLeader) Leading() bool { return true }

func (l *waitingLeader) WaitForCommit(ctx context.Context, commit string, _ time.Duration) raftstore.Generation {
	select {
	case <-l.release:
	case <-ctx.Done():
	}
	return raftstore.Generation{Number: 2, State: raftstore.GenerationActive, Commit: commit}
}

// TestCancelRunningCommit: a running commit operation is cancelled
// (CANCELLED, saying the pushed commit stays), its completion afterwards
// leaves it cancelled, a second cancel is FAILED_PRECONDITION, a delete
// is refused while it runs and forgets it once done.
func TestCancelRunningCommit(t *testing.T) {
	store := leadertest.NewStore()
	leader := &waitingLeader{release: make(chan struct{})}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{Store: store, Leader: leader, Logger: testlog.New(t), Now: func() time.Time { return now }})
	ctx := context.Background()
	op := preview.NewOperation("c0ffee", preview.MethodCommit, "policies/web/experiments/e", now)
	op.Metadata.Commit = "abc123"
	if err := s.records.putOperation(ctx, op); err != nil {
		t.Fatal(err)
	}
	completed := make(chan struct{})
	go func() { s.completeCommit(op, "abc123"); close(completed) }()

	if err := s.DeleteOperation(ctx, op.Name); !hasCode(err, errs.FailedPrecondition) {
		t.Errorf("delete of a running operation: %v", err)
	}
	c, err := s.CancelOperation(ctx, op.Name)
	if err != nil || !c.Done || c.Error == nil || c.Error.Code != int(errs.Canceled) {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	t.Logf("cancelled: %s", c.Error.Message)
	close(leader.release)
	<-completed
	got, _, err := s.operation("c0ffee")
	if err != nil || got.Error == nil || got.Error.Code != int(errs.Canceled) {
		t.Fatalf("after the commit's generation went live: %+v %v", got, err)
	}
	if _, err := s.CancelOperation(ctx, op.Name); !hasCode(err, errs.FailedPrecondition) {
		t.Errorf("a second cancel: %v", err)
	}
	if err := s.DeleteOperation(ctx, op.Name); err != nil {
		t.Fatalf("delete of a done operation: %v", err)
	}
	if _, ok := store.State().Operations["c0ffee"]; ok {
		t.Error("the deleted operation is still stored")
	}
	if _, err := s.CancelOperation(ctx, "operations/nope"); !hasCode(err, errs.NotFound) {
		t.Errorf("cancel of an unknown operation: %v", err)
	}
}

func hasCode(err error, c errs.Code) bool {
	got, ok := errs.CodeOf(err)
	return ok && got == c
}
