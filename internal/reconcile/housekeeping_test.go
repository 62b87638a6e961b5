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
	eventually(t, "the run over", func() bool { return !l.housekeeping.Load() })
	if n, staged := repo.runs.Load(), repo.stagedN.Load(); n != 1 || staged != 1 {
		t.Fatalf("housekeeping ran %d times (generation %d staged), want once after staging 1", n, staged)
	}
	repo.Commit("main", webPolicy("b"))
	settle(t, l, repo.fakeRepo)
	settle(t, l, repo.fakeRepo)
	eventually(t, "the run over", func() bool { return !l.housekeeping.Load() })
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

// blockingRepo's housekeeping runs until released, as a repack of a large
// list's history does for seconds.
type blockingRepo struct {
	*fakeRepo
	started chan struct{}
	release chan struct{}
	runs    atomic.Int32
}

func (r *blockingRepo) Housekeep(ctx context.Context, _ map[uint64]string) (gitsource.Housekeeping, error) {
	if r.runs.Add(1) == 1 {
		close(r.started)
	}
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	return gitsource.Housekeeping{Ran: true}, nil
}

// A push that lands while housekeeping runs is staged without waiting for
// it: the run is beside the passes, not in one; and no second run starts
// while one is going.
func TestLoopStagesWhileHousekeeping(t *testing.T) {
	store := newFakeStore()
	repo := &blockingRepo{fakeRepo: newFakeRepo(), started: make(chan struct{}), release: make(chan struct{})}
	repo.Commit("main", webPolicy("a"))
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	l.housekeepQuiet = 0
	runLoop(t, l)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	settle(t, l, repo.fakeRepo)
	<-repo.started
	repo.Commit("main", webPolicy("b"))
	l.Trigger()
	eventually(t, "generation 2 staged while housekeeping runs", func() bool { return store.State().Staged == 2 })
	settle(t, l, repo.fakeRepo) // idle, due again: the run in progress is not doubled
	if n := repo.runs.Load(); n != 1 {
		t.Errorf("%d housekeeping runs at once, want 1", n)
	}
	close(repo.release)
}
