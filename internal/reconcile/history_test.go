package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// What a commit says becomes bounded, single-line text; markup stays as
// written, for the renderer to show as text.
func TestHistoryOfIsBoundedAndInert(t *testing.T) {
	hostile := "<img src=x onerror=alert(1)>"
	for _, tc := range []struct {
		name string
		meta gitsource.CommitMeta
		want raftstore.History
	}{
		{"plain commit", gitsource.CommitMeta{AuthorName: "Ann", AuthorEmail: "ann@example.com", Message: "v2\n\nRequested-by: nobody"},
			raftstore.History{Author: "Ann <ann@example.com>"}},
		{"rollback with trailer", gitsource.CommitMeta{AuthorName: "reconciler", AuthorEmail: "reconciler@localhost",
			Message: "Revert to generation 4 (abc)\n\nRequested-by: ops (admin)\n"},
			raftstore.History{Author: "reconciler <reconciler@localhost>", RollbackOf: 4, RequestedBy: "ops (admin)"}},
		{"hostile names", gitsource.CommitMeta{AuthorName: hostile + "\r\nforged: line\u202e", AuthorEmail: "m@x",
			Message: "Revert to generation 2 (x)\n\nrequested-by: " + hostile + "\x1b[31m"},
			raftstore.History{Author: hostile + " forged: line <m@x>", RollbackOf: 2, RequestedBy: hostile + " [31m"}},
		{"not a rollback", gitsource.CommitMeta{Message: "Revert to generation x (y)\n\nRequested-by: eve"}, raftstore.History{}},
	} {
		if got := historyOf(tc.meta); got != tc.want {
			t.Errorf("%s: history = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	long := historyOf(gitsource.CommitMeta{AuthorName: strings.Repeat("é", raftstore.MaxHistoryText), AuthorEmail: "e@x"})
	if len(long.Author) > raftstore.MaxHistoryText || !strings.HasSuffix(long.Author, "…") || !strings.HasPrefix(long.Author, "éé") {
		t.Errorf("long author: %d bytes %q", len(long.Author), long.Author[len(long.Author)-8:])
	}
}

// Through real git: a generation records its commit's author; a rollback
// records its target and who asked; a revert pushed by hand records what
// its message says.
func TestGitGenerationHistory(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t, viaHTTP, 10*time.Second)
	if g := gen(t, r.store, 1); g.Author != "Test User <test@example.com>" || g.RollbackOf != 0 {
		t.Fatalf("generation 1 history = %+v", g.History)
	}
	r.srv.Commit(r.work, webPolicy("v1"), "v1")
	r.srv.Git(r.work, "commit", "--amend", "--no-edit", "--author", `Mallory "quoted" & co <mallory@example.com>`)
	r.srv.Push(r.work, "main")
	r.loop.Trigger()
	eventually(t, "generation 2 active", func() bool { return r.store.State().Active == 2 })
	if g := gen(t, r.store, 2); g.Author != `Mallory "quoted" & co <mallory@example.com>` || g.RollbackOf != 0 || g.RequestedBy != "" {
		t.Fatalf("generation 2 history = %+v", g.History)
	}

	res, err := r.loop.Rollback(context.Background(), RollbackRequest{Wait: 20 * time.Second, RequestedBy: "ops (admin)"})
	if err != nil || res.Generation != 3 {
		t.Fatalf("rollback = %+v, %v", res, err)
	}
	want := raftstore.History{Author: gitsource.DefaultAuthorName + " <" + gitsource.DefaultAuthorEmail + ">", RollbackOf: 1, RequestedBy: "ops (admin)"}
	if g := gen(t, r.store, 3); g.History != want {
		t.Fatalf("rollback's generation history = %+v, want %+v", g.History, want)
	}

	r.srv.Git(r.work, "pull", "-q", "origin", "main")
	r.push(t, "main", webPolicy("v2"), "Revert to generation 2 (by hand)\n\nRequested-by: <img src=x onerror=alert(1)>")
	r.loop.Trigger()
	eventually(t, "generation 4 active", func() bool { return r.store.State().Active == 4 })
	want = raftstore.History{Author: "Test User <test@example.com>", RollbackOf: 2, RequestedBy: "<img src=x onerror=alert(1)>"}
	if g := gen(t, r.store, 4); g.History != want {
		t.Fatalf("hand revert's generation history = %+v, want %+v", g.History, want)
	}
}

// A plain `git revert` pushed by hand ("Revert \"…\"", "This reverts
// commit <sha>.") is a rollback too: of the active generation's commit,
// it restores the generation that was active before it, as the tool's
// own rollback would. A revert of a commit no generation has is not one.
func TestGitPlainRevertIsARollback(t *testing.T) {
	t.Parallel()
	r := newGitRepo(t, viaHTTP, 10*time.Second)
	r.push(t, "main", webPolicy("v1"), "v1")
	r.loop.Trigger()
	eventually(t, "generation 2 active", func() bool { return r.store.State().Active == 2 })
	v2 := r.push(t, "main", webPolicy("v2"), "v2 tightens things")
	r.loop.Trigger()
	eventually(t, "generation 3 active", func() bool { return r.store.State().Active == 3 })
	if g := gen(t, r.store, 3); g.Commit != v2 {
		t.Fatalf("generation 3 is %s, want %s", g.Commit, v2)
	}

	r.srv.Git(r.work, "revert", "--no-edit", v2)
	r.srv.Push(r.work, "main")
	r.loop.Trigger()
	eventually(t, "generation 4 active", func() bool { return r.store.State().Active == 4 })
	if g := gen(t, r.store, 4); g.RollbackOf != 2 || g.RequestedBy != "" || g.Author != "Test User <test@example.com>" {
		t.Fatalf("git revert of generation 3's commit: history %+v, want a rollback to generation 2", g.History)
	}
	if msg := r.srv.Git(r.work, "log", "-1", "--format=%B"); !strings.Contains(msg, "This reverts commit "+v2) {
		t.Fatalf("git wrote %q", msg)
	}

	// A commit pushed together with its revert is superseded, never a
	// generation: the revert names no generation and is no rollback.
	r.srv.Commit(r.work, webPolicy("v3"), "v3 is never staged alone")
	tip := strings.TrimSpace(r.srv.Git(r.work, "rev-parse", "HEAD"))
	r.srv.Git(r.work, "revert", "--no-edit", tip)
	r.srv.Push(r.work, "main")
	r.loop.Trigger()
	eventually(t, "generation 5 active", func() bool { return r.store.State().Active == 5 })
	if g := gen(t, r.store, 5); g.RollbackOf != 0 {
		t.Fatalf("revert of %s (no generation's commit): history %+v", tip, g.History)
	}
}

// The revert trailer is read strictly: a full hash on its own line, of a
// generation the state has, and only in a revert's message.
func TestRevertedCommit(t *testing.T) {
	sha := strings.Repeat("ab", 20)
	for _, tc := range []struct{ msg, want string }{
		{"Revert \"v2\"\n\nThis reverts commit " + sha + ".\n", sha},
		{"Revert \"v2\"\n\nThis reverts commit " + sha + ".\n\nbecause it broke the shop\n", sha},
		{"Revert \"Revert \\\"v2\\\"\"\n\nThis reverts commit " + sha + ".\n", sha},
		{"Reapply \"v2\"\n\nThis reverts commit " + sha + ".\n", sha},
		{"v2\n\nThis reverts commit " + sha + ".\n", ""},                 // not a revert's subject
		{"Revert \"v2\"\n\nThis reverts commit " + sha[:12] + ".\n", ""}, // abbreviated
		{"Revert \"v2\"\n\nsee: This reverts commit " + sha + ".\n", ""},
	} {
		if got := revertedCommit(tc.msg); got != tc.want {
			t.Errorf("revertedCommit(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// FuzzRevertedCommit: a commit message names a reverted commit only as a
// full hash that is in the message, after a revert's subject.
func FuzzRevertedCommit(f *testing.F) {
	f.Add("Revert \"v2\"\n\nThis reverts commit " + strings.Repeat("ab", 20) + ".\n")
	f.Add("Revert \"x\"\r\n\r\nThis reverts commit " + strings.Repeat("0", 64) + ".")
	f.Fuzz(func(t *testing.T, msg string) {
		got := revertedCommit(msg)
		if got == "" {
			return
		}
		if (len(got) != 40 && len(got) != 64) || strings.Trim(got, "0123456789abcdef") != "" ||
			!strings.Contains(msg, "This reverts commit "+got+".") || !(strings.HasPrefix(strings.TrimSpace(msg), "Revert \"") || strings.HasPrefix(strings.TrimSpace(msg), "Reapply \"")) {
			t.Fatalf("revertedCommit(%q) = %q", msg, got)
		}
	})
}
