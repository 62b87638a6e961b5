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

	res, err := r.loop.Rollbacks().Rollback(context.Background(), RollbackRequest{Wait: 20 * time.Second, RequestedBy: "ops (admin)"})
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
