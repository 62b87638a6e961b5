package experiments

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Operations are bounded: done ones expire after OperationRetention, the
// oldest beyond MaxDoneOperations go, and one left running by a leader
// that stopped is completed as UNAVAILABLE after the commit wait.
func TestPruneOperations(t *testing.T) {
	store := leadertest.NewStore()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := New(Config{Store: store, Logger: testlog.New(t), Now: func() time.Time { return now }})
	ctx := context.Background()
	put := func(id string, created time.Time, done bool) {
		op := preview.NewOperation(id, preview.MethodCommit, "policies/web/experiments/e", created)
		if done {
			op, _ = op.Succeed(nil, created.Add(time.Second))
		}
		if err := l.records.putOperation(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	put("expired", now.Add(-25*time.Hour), true)
	put("orphan", now.Add(-DefaultCommitWait-2*time.Minute), false)
	put("running", now.Add(-time.Second), false)
	for i := range MaxDoneOperations + 3 {
		put(fmt.Sprintf("done-%04d", i), now.Add(-time.Hour+time.Duration(i)*time.Second), true)
	}
	var tm time.Time
	l.PruneOperations(ctx, &tm)
	ops := store.State().Operations
	for _, gone := range []string{"expired", "done-0000", "done-0001", "done-0002"} {
		if _, ok := ops[gone]; ok {
			t.Errorf("operation %s kept", gone)
		}
	}
	for _, kept := range []string{"running", "done-0003", fmt.Sprintf("done-%04d", MaxDoneOperations+2)} {
		if _, ok := ops[kept]; !ok {
			t.Errorf("operation %s deleted", kept)
		}
	}
	orphan, err := preview.DecodeOperation(ops["orphan"].Data)
	if err != nil || !orphan.Done || orphan.Error == nil || orphan.Error.Code != int(preview.Unavailable) {
		t.Fatalf("orphaned operation %+v %v", orphan, err)
	}

	// Scans are spaced: a second pass within a minute proposes nothing.
	before := store.Total()
	put("expired-2", now.Add(-48*time.Hour), true)
	l.PruneOperations(ctx, &tm)
	if store.Total() != before+1 {
		t.Fatal("a second scan within pruneEvery")
	}
	now = now.Add(pruneEvery + time.Second)
	l.PruneOperations(ctx, &tm)
	if _, ok := store.State().Operations["expired-2"]; ok {
		t.Fatal("expired-2 kept by the next scan")
	}
	// The orphan, now done, made one done operation too many: the oldest went.
	if _, ok := store.State().Operations["done-0003"]; ok || len(store.State().Operations) != MaxDoneOperations+1 {
		t.Fatalf("%d operations after the second scan, want %d done and one running", len(store.State().Operations),
			MaxDoneOperations)
	}
	if store.Count(raftstore.TypeDeleteOperation) != 6 {
		t.Fatalf("%d deletes, want 6", store.Count(raftstore.TypeDeleteOperation))
	}
}
