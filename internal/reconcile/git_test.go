package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestMain keeps the git processes of the tests (the CLI, and the ones
// go-git starts for local remotes) away from the developer's config.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

const testToken = "s3cret-token"

// gitRepo is a repository on a gittest server, a user's clone of it, and
// the leader's GitSource following it through url.
type gitRepo struct {
	srv   *gittest.Server
	work  string
	src   *GitSource
	store *fakeStore
	loop  *Loop
}

// The ways the leader can reach a repository in the tests.
const (
	viaHTTP = "http with token"
	viaPath = "local path"
	viaFile = "file URL"
)

func newGitRepo(t *testing.T, via string, timeout time.Duration) *gitRepo {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{Token: testToken})
	url := srv.InitRepo("policies", webPolicy("v0"))
	switch via {
	case viaPath:
		url = srv.RepoPath("policies")
	case viaFile:
		url = "file://" + srv.RepoPath("policies")
	}
	src, err := OpenGit(context.Background(), gitsource.Config{URL: url, Token: testToken, Path: ".",
		Dir: filepath.Join(t.TempDir(), "git"), Timeout: timeout, Logger: testlog.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := &gitRepo{srv: srv, work: srv.Clone(srv.URL("policies")), src: src, store: newFakeStore()}
	r.loop = startLoop(t, r.store, src, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return r.store.State().Active == 1 })
	return r
}

// push commits files on the work tree's current branch and pushes it, as
// a user does; it returns the commit.
func (r *gitRepo) push(t *testing.T, branch string, files map[string]string, msg string) string {
	t.Helper()
	h := r.srv.Commit(r.work, files, msg)
	r.srv.Push(r.work, branch)
	return h
}

func TestGitEveryPushAGeneration(t *testing.T) {
	for _, via := range []string{viaHTTP, viaPath, viaFile} {
		t.Run(via, func(t *testing.T) {
			r := newGitRepo(t, via, 10*time.Second)
			r.push(t, "main", webPolicy("v1"), "v1")                              // superseded by v3
			bad := r.push(t, "main", brokenPolicy, "typo")                        // generation 2 INVALID
			v3 := r.push(t, "main", webPolicy("v3"), "v3")                        // generation 3
			doc := r.push(t, "main", map[string]string{"README.md": "hi"}, "doc") // no generation
			r.loop.Trigger()
			eventually(t, "generation 3 active", func() bool { return r.store.State().Active == 3 })
			if g := gen(t, r.store, 2); g.Commit != bad || g.State != raftstore.GenerationInvalid {
				t.Errorf("generation 2 = %s %s", g.Commit, g.State)
			}
			if g := gen(t, r.store, 3); g.Commit != v3 {
				t.Errorf("generation 3 = %s, want %s", g.Commit, v3)
			}
			time.Sleep(100 * time.Millisecond)
			if st := r.store.State(); st.Highest != 3 || r.loop.SourceStatus().Commit != doc {
				t.Errorf("highest %d, source at %s, want %s", st.Highest, r.loop.SourceStatus().Commit, doc)
			}
		})
	}
}

func TestGitBranchesAndRollback(t *testing.T) {
	r := newGitRepo(t, viaHTTP, 10*time.Second)
	first := gen(t, r.store, 1)
	r.push(t, "main", webPolicy("v1"), "v1")
	r.loop.Trigger()
	eventually(t, "generation 2 active", func() bool { return r.store.State().Active == 2 })

	r.srv.CreateBranch(r.work, "try-v9")
	head := r.push(t, "try-v9", webPolicy("v9"), "try v9")
	r.srv.Checkout(r.work, "main")
	r.loop.Trigger()
	eventually(t, "branch recorded", func() bool {
		rec, ok := ReadBranchRecords(r.store.State())["branches/try-v9"]
		return ok && rec.HeadCommit == head && fmt.Sprint(rec.ChangedPolicies) == "[web]" && rec.Validation.Valid
	})

	res, err := r.loop.Rollbacks().Rollback(context.Background(), RollbackRequest{Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Target != 1 || res.Generation != 3 || res.State != raftstore.GenerationActive {
		t.Fatalf("rollback = %+v", res)
	}
	msg := r.srv.Git(r.srv.RepoPath("policies"), "log", "-1", "--format=%s", "main")
	if msg != "Revert to generation 1 ("+first.Commit+")" || r.srv.Head("policies", "main") != res.Commit {
		t.Errorf("main's head: %q", msg)
	}
	if g := gen(t, r.store, 3); g.Etags["web"] != first.Etags["web"] {
		t.Error("generation 3 does not restore generation 1's policy")
	}
	// Pushing to main refused: a clear error, main unchanged.
	r.srv.RejectPushes("policies", "main", true)
	_, err = r.loop.Rollbacks().Rollback(context.Background(), RollbackRequest{Generation: 2})
	if !errors.Is(err, gitsource.ErrPushRefused) || !strings.Contains(err.Error(), gittest.RejectMessage) {
		t.Errorf("refused rollback: %v", err)
	}
	if r.srv.Head("policies", "main") != res.Commit {
		t.Error("main moved after a refused push")
	}
	// The branch goes away: its record too.
	r.srv.Git(r.work, "push", "-q", "origin", "--delete", "try-v9")
	r.loop.Trigger()
	eventually(t, "branch record deleted", func() bool { return len(ReadBranchRecords(r.store.State())) == 0 })
}

// TestGitRemoteDownOrSlow: a stopped remote and a slow one are PullErrors
// within the deadline; goroutines do not pile up over many polls; the
// active generation is untouched; the error clears when the remote is back.
func TestGitRemoteDownOrSlow(t *testing.T) {
	const timeout = 500 * time.Millisecond
	r := newGitRepo(t, viaHTTP, timeout)
	for _, tc := range []struct {
		name   string
		break_ func()
		reason string
	}{
		{"stopped", r.srv.Down, "network"},
		// The remote answers nothing for an hour: a PullError at all
		// means the deadline ended the fetch (no clock is judged).
		{"slow", func() { r.srv.Slow(time.Hour) }, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			tc.break_()
			r.loop.Trigger()
			eventually(t, "a PullError", func() bool { _, ok := ReadSourceRecord(r.store.State()); return ok })
			if rec, _ := ReadSourceRecord(r.store.State()); rec.Reason != tc.reason || strings.Contains(rec.Error, testToken) {
				t.Errorf("record = %+v", rec)
			}
			for range 10 {
				r.loop.Trigger()
				time.Sleep(timeout / 4)
			}
			time.Sleep(2 * timeout)
			if after := runtime.NumGoroutine(); after > before+10 {
				t.Errorf("goroutines grew from %d to %d over 10 failing polls", before, after)
			}
			if st := r.store.State(); st.Active != 1 || st.Highest != 1 {
				t.Errorf("active %d highest %d", st.Active, st.Highest)
			}
			r.srv.Slow(0)
			r.srv.Up()
			r.loop.Trigger()
			eventually(t, "PullError cleared", func() bool { _, ok := ReadSourceRecord(r.store.State()); return !ok })
		})
	}
}

func TestGitCommitsFollowsFirstParents(t *testing.T) {
	r := newGitRepo(t, viaPath, 10*time.Second)
	base := r.srv.Head("policies", "main")
	a := r.push(t, "main", map[string]string{"a": "1"}, "a")
	r.srv.CreateBranch(r.work, "side")
	r.srv.Commit(r.work, map[string]string{"s": "1"}, "side")
	r.srv.Checkout(r.work, "main")
	r.srv.Git(r.work, "merge", "-q", "--no-ff", "-m", "merge side", "side")
	r.srv.Push(r.work, "main")
	merge := r.srv.Head("policies", "main")
	if _, err := r.src.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from string
		max  int
		want []string
	}{
		{base, 10, []string{a, merge}},
		{a, 10, []string{merge}},
		{merge, 10, nil},
		{"", 10, []string{merge}},
		{base, 1, []string{merge}},
		{strings.Repeat("0", 40), 10, []string{merge}}, // not an ancestor
	} {
		got, err := r.src.Commits(tc.from, merge, tc.max)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Commits(%.7s, max %d) = %v %v, want %v", tc.from, tc.max, got, err, tc.want)
		}
	}
}
