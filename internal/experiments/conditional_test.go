package experiments

import (
	"context"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// gatedStore is the shared log as one leader sees it: allow is the
// cluster version's answer, before runs once before its next proposal
// (what another leader gets into the log meanwhile).
type gatedStore struct {
	*leadertest.Store
	allow  bool
	before func()
}

func (g *gatedStore) Allows(raftstore.CommandType, uint8) bool { return g.allow }

func (g *gatedStore) Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error) {
	if f := g.before; f != nil {
		g.before = nil
		f()
	}
	return g.Store.Propose(ctx, p)
}

// A departing leader cancels a commit operation while the next leader,
// which read it running, completes it. Once every member can apply a
// conditional write, the completion loses and the cancel stays; before,
// the completion overwrote the cancel, as 1.0.0 does.
func TestCancelAndCompletionFromTwoLeaders(t *testing.T) {
	for _, allow := range []bool{true, false} {
		log := leadertest.NewStore()
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		departing := New(Config{Store: &gatedStore{Store: log, allow: allow}, Leader: leadingHere{}, Logger: testlog.New(t), Now: clock})
		next := &gatedStore{Store: log, allow: allow}
		successor := New(Config{Store: next, Leader: leadingHere{}, Logger: testlog.New(t), Now: clock})
		ctx := context.Background()
		op := preview.NewOperation("c0ffee", preview.MethodCommit, "policies/web/experiments/e", now)
		if err := departing.records.putOperation(ctx, op); err != nil {
			t.Fatal(err)
		}
		next.before = func() {
			if _, err := departing.CancelOperation(ctx, op.Name); err != nil {
				t.Fatal(err)
			}
		}
		done, err := op.Succeed(nil, now)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := successor.completeIfRunning(ctx, done)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := successor.operation("c0ffee")
		if err != nil {
			t.Fatal(err)
		}
		cancelled := got.Error != nil
		if stored == allow || cancelled != allow {
			t.Errorf("conditional=%v: completion stored %v, operation cancelled %v", allow, stored, cancelled)
		}
	}
}
