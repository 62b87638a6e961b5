package github

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// emuEnv is a loop whose [github] is a real forge.Client on the GitHub
// emulator: the pull request #1 of "bob" (read only), alice a writer.
type emuEnv struct {
	store *fakeStore
	emu   *githubemu.Server
	repo  *githubemu.Repo
	l     *leader
	head  string
}

func newEmuEnv(t *testing.T) *emuEnv {
	t.Helper()
	const token = "emu-token"
	e := &emuEnv{store: newFakeStore(), emu: githubemu.New(githubemu.Options{Token: token}), head: strings.Repeat("a", 40)}
	t.Cleanup(e.emu.Close)
	e.repo = e.emu.AddRepo("o/r", "main")
	e.repo.SetRef("main", strings.Repeat("b", 40))
	e.repo.SetPermission("alice", forge.PermWrite)
	e.repo.SetPermission("bob", forge.PermRead)
	if n := e.repo.OpenPull(githubemu.Pull{HeadRef: "change", HeadSHA: e.head, BaseRef: "main", Author: "bob"}); n != 1 {
		t.Fatalf("pull request #%d", n)
	}
	putPull(t, e.store, 1, e.head)
	e.l = emuLoop(t, e.emu, token, e.store, newFakeRepo(), nil, preview.Settings{})
	return e
}

// emuLoop is a loop over store and repo whose [github] is a forge.Client
// on emu's repository "o/r".
func emuLoop(t *testing.T, emu *githubemu.Server, token string, store *fakeStore, repo *fakeRepo, stats func() []preview.Stats,
	set preview.Settings) *leader {
	t.Helper()
	fc, err := forge.New(forge.Config{Repository: "o/r", APIURL: emu.URL(), Token: token, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ghLoopOn(t, store, repo, fc, stats, set)
}

func (e *emuEnv) merged() bool {
	p, _ := e.repo.Pull(1)
	return p.Merged
}

// A command handed to the leader with no such comment on GitHub (a
// forged POST to the internal enqueue endpoint), or naming another author,
// verb or pull request than the comment, does nothing: the leader re-reads
// the comment by id. The real comment then merges.
func TestForgedCommandDoesNothing(t *testing.T) {
	e := newEmuEnv(t)
	ctx := context.Background()
	other := e.repo.OpenPull(githubemu.Pull{HeadRef: "other", HeadSHA: strings.Repeat("c", 40), BaseRef: "main", Author: "alice"})
	byBob := e.repo.AddComment(1, "bob", "/reconciler commit")
	help := e.repo.AddComment(1, "alice", "/reconciler help")
	elsewhere := e.repo.AddComment(other, "alice", "/reconciler commit")
	deleted := e.repo.AddComment(1, "alice", "/reconciler commit")
	e.repo.DeleteComment(deleted)
	forged := []webhook.Command{
		{PR: 1, User: "alice", Verb: webhook.VerbCommit},                       // the attack: no comment at all
		{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: 999999},    // no such comment
		{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: byBob},     // another author
		{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: help},      // another command
		{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: elsewhere}, // another pull request
		{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: deleted},   // deleted since
	}
	for _, cmd := range forged {
		e.l.runCommand(ctx, queuedCommand{cmd: cmd})
		if e.merged() {
			t.Fatalf("forged %+v merged the pull request", cmd)
		}
	}
	if n := len(e.repo.Comments(1)); n != 2 {
		t.Errorf("%d comments on #1 after forged commands, want the 2 users' left (no reply to a forgery)", n)
	}
	real := e.repo.AddComment(1, "alice", "/reconciler commit")
	e.l.runCommand(ctx, queuedCommand{cmd: webhook.Command{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: real}})
	if !e.merged() {
		t.Fatalf("alice's real command did not merge; comments %+v", e.repo.Comments(1))
	}
}

// A /reconciler commit merges the head the leader had when the command
// came: a push while GitHub rate-limits the merge is refused with a reply
// asking for a new command, whether the leader saw the push (its record
// moved) or only GitHub did (the merge's sha answers 409).
func TestCommitRefusedWhenHeadMoved(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		e := newEmuEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		e.repo.SetPermission("bob", forge.PermWrite)
		id := e.repo.AddComment(1, "alice", "/reconciler commit")
		e.emu.Inject(githubemu.Fault{Kind: githubemu.TooManyRequests, Method: "PUT", Path: "/merge", RetryAfter: time.Second})
		e.l.runCommand(ctx, queuedCommand{cmd: webhook.Command{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: id}})

		pushed := strings.Repeat("d", 40) // bob pushes during the delay
		e.repo.Push("change", pushed)
		if recorded {
			putPull(t, e.store, 1, pushed)
		}
		select {
		case q := <-e.l.commands:
			e.l.runCommand(ctx, q)
		case <-time.After(30 * time.Second):
			t.Fatal("the rate-limited command was not queued again")
		}
		if e.merged() {
			t.Fatalf("recorded=%v: the pushed head was merged", recorded)
		}
		cs := e.repo.Comments(1)
		if last := cs[len(cs)-1].Body; !strings.Contains(last, "moved from aaaaaaaaaaaa") || !strings.Contains(last, "`/reconciler commit` again") {
			t.Fatalf("recorded=%v: reply %q", recorded, last)
		}
	}
}

// A /reconciler commit merges only a head the preview comment showed
// before the comment was written, by GitHub's clock: a comment delivered
// late, after a push the leader saw first, or written in the same second
// as the edit that showed the head, merges nothing; nor does any while the
// comment does not show the head yet.
func TestCommitRefusedWhenWrittenBeforeHead(t *testing.T) {
	e := newEmuEnv(t)
	ctx := context.Background()
	e.repo.SetPermission("bob", forge.PermWrite)
	shownAt := func(head string, at time.Time) {
		rec := ReadPullRecords(e.store.State())[1]
		rec.HeadShown, rec.HeadShownAt = head, at
		if _, err := e.store.Propose(ctx, &raftstore.PutPull{Record: rec}); err != nil {
			t.Fatal(err)
		}
	}
	// commit is alice's /reconciler commit, the record then saying since
	// when the comment shows the head (shown, given GitHub's date of hers).
	commit := func(shown func(written time.Time)) string {
		t.Helper()
		id := e.repo.AddComment(1, "alice", "/reconciler commit")
		cs := e.repo.Comments(1)
		shown(cs[len(cs)-1].CreatedAt)
		e.l.runCommand(ctx, queuedCommand{cmd: webhook.Command{PR: 1, User: "alice", Verb: webhook.VerbCommit, CommentID: id}})
		cs = e.repo.Comments(1)
		return cs[len(cs)-1].Body
	}
	refused := map[string]func(time.Time){
		"the preview comment does not show the head aaaaaaaaaaaa of #1 yet": func(time.Time) { shownAt("", time.Time{}) },
		// written, then bob pushes and the comment's edit shows his head:
		"`/reconciler commit` was written before the preview comment showed the head aaaaaaaaaaaa": func(w time.Time) {
			shownAt(e.head, w.Add(time.Minute))
		},
	}
	for want, shown := range refused {
		if reply := commit(shown); e.merged() || !strings.Contains(reply, want) {
			t.Fatalf("merged %v, reply %q; want %q", e.merged(), reply, want)
		}
	}
	// Whole seconds: written in the second of the edit counts as before.
	if reply := commit(func(w time.Time) { shownAt(e.head, w) }); e.merged() || !strings.Contains(reply, "written before the preview comment showed") {
		t.Fatalf("the same second: merged %v, reply %q", e.merged(), reply)
	}
	commit(func(w time.Time) { shownAt(e.head, w.Add(-time.Second)) })
	if !e.merged() {
		t.Fatalf("alice's commit a second after the comment showed the head did not merge; comments %+v", e.repo.Comments(1))
	}
}
