package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// twoGenerations runs a loop that has activated generation 1 (rule a) and
// then generation 2 (rule b), with no nodes to wait for.
func twoGenerations(t *testing.T) (*fakeStore, *fakeRepo, *Loop, string) {
	t.Helper()
	store, repo := newFakeStore(), newFakeRepo()
	c1 := repo.Commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	repo.Commit("main", webPolicy("b"))
	l.Trigger()
	eventually(t, "generation 2 active", func() bool { return store.State().Active == 2 })
	return store, repo, l, c1
}

func TestRollbackToPrevious(t *testing.T) {
	store, repo, l, c1 := twoGenerations(t)
	res, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := "Revert to generation 1 (" + c1 + ")"
	if res.Target != 1 || res.TargetCommit != c1 || res.Message != want || res.Revision != "main@sha1:"+res.Commit {
		t.Errorf("result = %+v", res)
	}
	if len(repo.Reverts) != 1 || repo.Reverts[0].ToHash != c1 || repo.Reverts[0].Message != want {
		t.Errorf("reverts = %+v", repo.Reverts)
	}
	// The normal path promoted the revert commit as a new generation.
	if res.Generation != 3 || res.State != raftstore.GenerationActive {
		t.Fatalf("new generation = %d %s", res.Generation, res.State)
	}
	if g1, g3 := gen(t, store, 1), gen(t, store, 3); g3.Commit != res.Commit || g3.Etags["web"] != g1.Etags["web"] {
		t.Errorf("generation 3 = %+v", g3)
	}
	// Rolling back again goes to 2, the one active before 3.
	res, err = l.Rollbacks().Rollback(context.Background(), RollbackRequest{Wait: 10 * time.Second})
	if err != nil || res.Target != 2 || res.Generation != 4 {
		t.Errorf("second rollback = %+v %v", res, err)
	}
}

func TestRollbackRefusals(t *testing.T) {
	store, repo, l, _ := twoGenerations(t)
	cases := []struct {
		name string
		gen  uint64
		want error
	}{
		{"unknown", 9, raftstore.ErrUnknownGeneration},
		{"the one served", 2, ErrCannotRollBack},
	}
	for _, tc := range cases {
		if _, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: tc.gen}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// An invalid generation and a directory generation are no targets.
	if _, err := store.Propose(context.Background(), &raftstore.MarkInvalid{Generation: 3, Commit: "x", Errors: []string{"bad"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: 3}); !errors.Is(err, ErrCannotRollBack) ||
		!strings.Contains(err.Error(), "INVALID") {
		t.Errorf("invalid target: %v", err)
	}
	if _, err := store.Propose(context.Background(), &raftstore.StageGeneration{Generation: 4, Commit: "dir@sha256:0123456789abcdef",
		Files: map[string][]byte{"web/policy.toml": []byte(webPolicy("z")["web/policy.toml"])}, Etags: map[string]string{"web": "z"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: 4}); !errors.Is(err, ErrCannotRollBack) ||
		!strings.Contains(err.Error(), "directory") {
		t.Errorf("directory target: %v", err)
	}
	// A protected main: the push is refused, with what to do instead.
	repo.PushErr = &gitsource.PushRefusedError{Ref: "refs/heads/main", Commit: "abc", Message: "GH006: Protected branch update failed"}
	_, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: 1})
	if !errors.Is(err, gitsource.ErrPushRefused) || !strings.Contains(err.Error(), "GH006") ||
		!strings.Contains(err.Error(), "pull request") || !strings.Contains(err.Error(), "abc") {
		t.Errorf("refused push: %v", err)
	}
	// A stale push is retried a few times.
	repo.PushErr = &gitsource.PushRefusedError{Ref: "refs/heads/main", Stale: true}
	n := len(repo.Reverts)
	if _, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: 1}); !errors.Is(err, gitsource.ErrPushRefused) ||
		len(repo.Reverts)-n != staleRetries {
		t.Errorf("stale push: %v after %d attempts", err, len(repo.Reverts)-n)
	}
}

func TestRollbackNeedsLeadership(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	l := newLoop(t, store, repo, fixedMembers{})
	if _, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{}); !errors.Is(err, raftstore.ErrNotLeader) {
		t.Errorf("not leading: %v", err)
	}
	runLoop(t, l)
	eventually(t, "leading", l.leading.Load)
	if _, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{}); !errors.Is(err, ErrCannotRollBack) {
		t.Errorf("no previous generation: %v", err)
	}
}
