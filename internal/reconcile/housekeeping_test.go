package reconcile

import (
	"context"
	"sync/atomic"
	"testing"

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

func (r *housekeptRepo) Housekeep(context.Context) (gitsource.Housekeeping, error) {
	r.runs.Add(1)
	r.stagedN.Store(r.store.State().Staged)
	return gitsource.Housekeeping{}, nil
}

// Housekeeping runs after a pass that fetched a new commit has staged it,
// and not on idle passes.
func TestLoopHousekeepsAfterPromotingOnly(t *testing.T) {
	store := newFakeStore()
	repo := &housekeptRepo{fakeRepo: newFakeRepo(), store: store}
	repo.Commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{"n1"})
	eventually(t, "generation 1 staged and the clone housekept", func() bool { return repo.runs.Load() == 1 })
	if n := repo.stagedN.Load(); n != 1 {
		t.Fatalf("housekeeping ran with generation %d staged, want after staging 1", n)
	}
	for range 3 {
		settle(t, l, repo.fakeRepo)
	}
	if n := repo.runs.Load(); n != 1 {
		t.Errorf("housekeeping ran %d times, want once: idle passes fetch nothing", n)
	}
}
