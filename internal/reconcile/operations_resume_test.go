package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/preview"
)

// leftCommitOperation stores, as CommitExperiment does once it pushed
// commit, a running commit operation on target, and returns its id.
func leftCommitOperation(t *testing.T, store *fakeStore, target, commit string) string {
	t.Helper()
	now := time.Now()
	op := preview.NewOperation(preview.OperationID(preview.MethodCommit, target, now), preview.MethodCommit, target, now)
	op.Metadata.Commit = commit
	p, err := op.PutPayload()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Propose(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(op.Name, "operations/")
}

// newLoopExps is newLoop with the experiment service the node wires
// beside it, which owns the operations.
func newLoopExps(t *testing.T, store *fakeStore, src Source, members Members) *Loop {
	t.Helper()
	l := newLoop(t, store, src, members)
	l.cfg.Experiments = experiments.New(experiments.Config{Store: store, Leader: leaderOf(l), LoadOptions: l.cfg.LoadOptions,
		EngineOptions: l.cfg.EngineOptions, Logger: l.log, Now: func() time.Time { return l.cfg.Now() }})
	return l
}

// exps is l's experiment service.
func exps(l *Loop) *experiments.Service { return l.cfg.Experiments.(*experiments.Service) }

// firstLeader runs a leader loop on src until generation 1 is active,
// and returns it with the func that ends its term.
func firstLeader(t *testing.T, store *fakeStore, src Source) (*Loop, func()) {
	t.Helper()
	first := newLoopExps(t, store, src, fixedMembers{"n1"})
	stop := runLoop(t, first)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	ready(t, store, 1, "n1")
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	return first, stop
}

// storedOperation decodes operation id of the store's state.
func storedOperation(t *testing.T, store *fakeStore, id string) *preview.Operation {
	t.Helper()
	doc, ok := store.State().Operations[id]
	if !ok {
		t.Fatalf("operation %s is gone", id)
	}
	op, err := preview.DecodeOperation(doc.Data)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// The bug seen in test/changepath: the leader pushed a commit and stored
// its running operation, then lost leadership before the generation was
// active; the next leader promoted the commit but nobody completed the
// operation until the orphan fallback failed it a minute after the commit
// wait. The new leader completes it once the generation is active.
func TestNewLeaderCompletesLeftCommitOperation(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	c1 := repo.Commit("main", webPolicy("a"))
	first, stop := firstLeader(t, store, repo)

	c2 := repo.Commit("main", webPolicy("b"))
	id := leftCommitOperation(t, store, "policies/web/experiments/x", c2)
	first.Trigger()
	eventually(t, "generation 2 staged", func() bool { return store.State().Staged == 2 })
	stop() // leadership lost before generation 2 is active

	second := newLoopExps(t, store, repo, fixedMembers{"n1"})
	runLoop(t, second)
	if op := storedOperation(t, store, id); op.Done {
		t.Fatalf("operation done while its generation is staged: %+v", op)
	}
	ready(t, store, 2, "n1")
	eventually(t, "the left commit operation done", func() bool { return storedOperation(t, store, id).Done })
	op := storedOperation(t, store, id)
	if op.Error != nil || !strings.Contains(string(op.Response), "google.protobuf.Empty") || gen(t, store, 2).Commit != c2 {
		t.Errorf("operation %+v (response %s), generation 2 of %s (first %s)", op, op.Response, gen(t, store, 2).Commit, c1)
	}
}

// A left commit whose generation is INVALID fails as the original leader
// would have failed it: FAILED_PRECONDITION naming the generation.
func TestNewLeaderFailsLeftCommitOperationOfInvalidGeneration(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	first := newLoopExps(t, store, repo, fixedMembers{"n1"})
	stop := runLoop(t, first)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	stop()

	c2 := repo.Commit("main", brokenPolicy)
	id := leftCommitOperation(t, store, "policies/web/experiments/x", c2)
	second := newLoopExps(t, store, repo, fixedMembers{"n1"})
	runLoop(t, second)
	eventually(t, "the left commit operation done", func() bool { return storedOperation(t, store, id).Done })
	op := storedOperation(t, store, id)
	if op.Error == nil || op.Error.Code != int(preview.FailedPrecondition) || !strings.Contains(op.Error.Message, "generation 2") {
		t.Errorf("operation %+v, want FAILED_PRECONDITION naming generation 2", op)
	}
}

// A commit operation without a recorded commit (an older build's) or
// whose commit made no generation yet is left to the orphan fallback.
func TestLeftCommitOperationWithoutGenerationStaysRunning(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	noCommit := leftCommitOperation(t, store, "policies/web/experiments/x", "")
	elsewhere := leftCommitOperation(t, store, "policies/web/experiments/y", strings.Repeat("ab", 20))
	l := newLoopExps(t, store, repo, fixedMembers{"n1"})
	runLoop(t, l)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	ready(t, store, 1, "n1")
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	exps(l).ResumeCommits(context.Background(), nil) // a scan with generation 1 active
	for _, id := range []string{noCommit, elsewhere} {
		if op := storedOperation(t, store, id); op.Done {
			t.Errorf("operation %s completed: %+v", id, op)
		}
	}
}

// The orphan fallback does not fail a left commit whose generation is
// active: a pass's scan can come before the promoter's (a term starting
// long after the leader stopped).
func TestPruneCompletesLeftCommitOfActiveGeneration(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	c1 := repo.Commit("main", webPolicy("a"))
	_, stop := firstLeader(t, store, repo)
	stop()

	l := newLoopExps(t, store, repo, fixedMembers{"n1"})
	ctx := context.Background()
	now := time.Now()
	l.cfg.Now = func() time.Time { return now }
	orphan := func(id, commit string) {
		op := preview.NewOperation(id, preview.MethodCommit, "policies/web/experiments/x",
			now.Add(-experiments.DefaultCommitWait-2*time.Minute)) // past the wait and the orphan grace (a minute)
		op.Metadata.Commit = commit
		p, err := op.PutPayload()
		if err == nil {
			_, err = store.Propose(ctx, &p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	orphan("live", c1)
	orphan("lost", strings.Repeat("cd", 20))
	exps(l).PruneOperations(ctx, new(time.Time))
	if op := storedOperation(t, store, "live"); !op.Done || op.Error != nil {
		t.Errorf("left commit of the active generation: %+v", op)
	}
	if op := storedOperation(t, store, "lost"); !op.Done || op.Error == nil || op.Error.Code != int(preview.Unavailable) {
		t.Errorf("left commit that made no generation: %+v", op)
	}
}

// ancestryRepo is a fakeRepo that walks first parents for IsAncestor,
// as gitsource.Source answers it.
type ancestryRepo struct{ *fakeRepo }

func (r ancestryRepo) IsAncestor(ancestor, descendant string) (bool, error) {
	for c := descendant; c != ""; c = r.Parent(c) {
		if c == ancestor {
			return true, nil
		}
	}
	return false, nil
}

// A left commit whose own generation was superseded by a newer commit's
// (or that made none) is complete once the active generation's commit
// descends from it: a pass completes it, without waiting for the orphan
// fallback.
func TestPassCompletesLeftCommitInActiveHistory(t *testing.T) {
	store, fake := newFakeStore(), newFakeRepo()
	repo := ancestryRepo{fake}
	fake.Commit("main", webPolicy("a"))
	first, stop := firstLeader(t, store, repo)
	c2 := fake.Commit("main", webPolicy("b"))
	c3 := fake.Commit("main", webPolicy("c"))
	first.Trigger()
	eventually(t, "the newest commit staged", func() bool {
		g, ok := store.State().StagedGeneration()
		return ok && g.Commit == c3
	})
	ready(t, store, store.State().Staged, "n1")
	eventually(t, "the newest commit active", func() bool {
		g, ok := store.State().ActiveGeneration()
		return ok && g.Commit == c3
	})
	stop()

	pending := leftCommitOperation(t, store, "policies/web/experiments/x", c2)
	unrelated := leftCommitOperation(t, store, "policies/web/experiments/y", strings.Repeat("ef", 20))
	l := newLoopExps(t, store, repo, fixedMembers{"n1"})
	exps(l).PruneOperations(context.Background(), new(time.Time))
	if op := storedOperation(t, store, pending); !op.Done || op.Error != nil {
		t.Errorf("left commit %s in the active history: %+v", c2, op)
	}
	if op := storedOperation(t, store, unrelated); op.Done {
		t.Errorf("left commit outside the active history completed before the commit wait: %+v", op)
	}
}
