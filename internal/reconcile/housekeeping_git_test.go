package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// looseObjects counts the loose objects of the clone in dir: none once
// housekeeping has run.
func looseObjects(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	fans, err := filepath.Glob(filepath.Join(dir, "objects", "[0-9a-f][0-9a-f]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fan := range fans {
		files, err := os.ReadDir(fan)
		if err != nil {
			t.Fatal(err)
		}
		n += len(files)
	}
	return n
}

// After an accepted force-push of main to an unrelated history, the
// commits of the earlier generations are reachable from no branch, but
// the cluster still records them: housekeeping keeps them, so a rollback
// to one and a read of its tree still work.
func TestGitHousekeepingKeepsRecordedGenerations(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t, gittest.Options{})
	url := srv.InitRepo("policies", webPolicy("v0"))
	dir := filepath.Join(t.TempDir(), "git")
	src, err := OpenGit(context.Background(), gitsource.Config{URL: url, Path: ".", Dir: dir,
		Timeout: 10 * time.Second, Logger: testlog.New(t), GC: gitsource.GCLimits{LooseObjects: -1}})
	if err != nil {
		t.Fatal(err)
	}
	store := newFakeStore()
	l := newLoop(t, store, src, fixedMembers{})
	l.housekeepQuiet = 0
	runLoop(t, l)
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	work := srv.Clone(url)
	srv.Commit(work, webPolicy("v1"), "v1")
	srv.Push(work, "main")
	l.Trigger()
	eventually(t, "generation 2 active", func() bool { return store.State().Active == 2 })
	old := gen(t, store, 2)

	srv.Git(work, "checkout", "-q", "--orphan", "rewritten")
	head := srv.Commit(work, webPolicy("v7"), "a new history")
	srv.Git(work, "push", "-q", "-f", "origin", "rewritten:main")
	l.Trigger()
	eventually(t, "the divergence noticed", func() bool { d := l.Diverged(); return d != nil && d.Commit == head })
	if err := l.AcceptHistory(context.Background(), head); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation 3 active", func() bool { return store.State().Active == 3 })
	settle(t, l, nil) // idle passes: the first one starts housekeeping
	eventually(t, "housekeeping packed every loose object", func() bool { return looseObjects(t, dir) == 0 && !l.housekeeping.Load() })
	if _, err := src.Files(old.Commit); err != nil {
		t.Fatalf("reading generation 2's commit after housekeeping: %v", err)
	}
	res, err := l.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: 2, Wait: 20 * time.Second})
	if err != nil {
		t.Fatalf("rollback to generation 2 after housekeeping: %v", err)
	}
	if res.State != raftstore.GenerationActive || gen(t, store, res.Generation).Etags["web"] != old.Etags["web"] {
		t.Fatalf("rollback = %+v, want generation 2's policies active", res)
	}
	if msg := srv.Show("policies", "main:web/policy.toml"); !strings.Contains(msg, "v1") {
		t.Errorf("main after the rollback holds %q, want v1's policy", msg)
	}
}
