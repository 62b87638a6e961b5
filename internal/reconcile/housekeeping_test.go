package reconcile

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
)

// housekeptRepo counts the housekeeping runs the loop asks for, and what
// generation was staged by then.
type housekeptRepo struct {
	*fakeRepo
	store   *fakeStore
	runs    atomic.Int32
	stagedN atomic.Uint64
}

func (r *housekeptRepo) Housekeep(context.Context, map[uint64]string) (gitsource.Housekeeping, error) {
	r.runs.Add(1)
	r.stagedN.Store(r.store.State().Staged)
	return gitsource.Housekeeping{}, nil
}

// Housekeeping runs on the first idle pass (its quiet period over) after
// one that fetched a new commit, never in the pass that stages it nor
// again on later idle ones.
func TestLoopHousekeepsOnTheFirstIdlePass(t *testing.T) {
	store := newFakeStore()
	repo := &housekeptRepo{fakeRepo: newFakeRepo(), store: store}
	repo.Commit("main", webPolicy("a"))
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	l.housekeepQuiet = 0
	runLoop(t, l)
	eventually(t, "the first pass", func() bool { return l.passes.Load() >= 1 && store.State().Staged == 1 })
	if n := repo.runs.Load(); n != 0 {
		t.Fatalf("housekeeping ran %d times in the pass that staged", n)
	}
	for range 3 {
		settle(t, l, repo.fakeRepo)
	}
	if n, staged := repo.runs.Load(), repo.stagedN.Load(); n != 1 || staged != 1 {
		t.Fatalf("housekeeping ran %d times (generation %d staged), want once after staging 1", n, staged)
	}
	repo.Commit("main", webPolicy("b"))
	settle(t, l, repo.fakeRepo)
	settle(t, l, repo.fakeRepo)
	if n := repo.runs.Load(); n != 2 {
		t.Errorf("housekeeping ran %d times after a second commit, want twice", n)
	}
}

// Within the quiet period after a change, idle passes do not housekeep.
func TestLoopHousekeepsOnlyAfterAQuietPeriod(t *testing.T) {
	store := newFakeStore()
	repo := &housekeptRepo{fakeRepo: newFakeRepo(), store: store}
	repo.Commit("main", webPolicy("a"))
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	l.housekeepQuiet = time.Hour
	runLoop(t, l)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	for range 3 {
		settle(t, l, repo.fakeRepo)
	}
	if n := repo.runs.Load(); n != 0 {
		t.Errorf("housekeeping ran %d times within the quiet period", n)
	}
}
