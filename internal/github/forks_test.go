package github

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// ghClock is GitHub's clock in a test: the real time plus an offset the
// test sets, to date a comment after (a writer who reviewed the head) or
// before (a comment delivered late) the leader recorded a head.
type ghClock struct{ off atomic.Int64 }

func (c *ghClock) Now() time.Time      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *ghClock) Set(d time.Duration) { c.off.Store(int64(d)) }
func (c *ghClock) Add(d time.Duration) { c.off.Add(int64(d)) }

// forkEnv is a leader with [github] on the emulator, where mallory (read
// permission) opened pull request n from a fork at head, changing web;
// alice may write.
type forkEnv struct {
	t     *testing.T
	store *fakeStore
	repo  *fakeRepo
	emu   *githubemu.Server
	gh    *githubemu.Repo
	clock *ghClock
	// leaderNow is the leaders' clock (the worker's Now); the real one
	// when nil.
	leaderNow func() time.Time
	l         *leader
	stop      func() // ends l's term
	n         int
	head      string
	name      string // the experiment of web
	stats     func() []preview.Stats
}

const forkToken = "emu-token"

func newForkEnv(t *testing.T, stats func() []preview.Stats) *forkEnv {
	return newForkEnvOf(t, stats, webPolicy("v1"), webPolicy("v2"))
}

// newForkEnvOf is newForkEnv with main and the fork's head at the given
// files.
func newForkEnvOf(t *testing.T, stats func() []preview.Stats, main, fork map[string]string) *forkEnv {
	return newForkEnvAt(t, stats, main, fork, nil)
}

// newForkEnvAt is newForkEnvOf with the leaders' clock at leaderNow.
func newForkEnvAt(t *testing.T, stats func() []preview.Stats, main, fork map[string]string, leaderNow func() time.Time) *forkEnv {
	f := &forkEnv{t: t, store: newFakeStore(), repo: newFakeRepo(), clock: &ghClock{}, stats: stats, leaderNow: leaderNow}
	f.emu = githubemu.New(githubemu.Options{Token: forkToken, Now: f.clock.Now})
	t.Cleanup(f.emu.Close)
	f.gh = f.emu.AddRepo("o/r", "main")
	f.gh.SetPermission("alice", forge.PermWrite)
	f.gh.SetPermission("mallory", forge.PermRead)
	f.gh.SetRef("main", f.repo.Commit("main", main))
	f.head = f.repo.Commit("fork", fork)
	f.n = f.gh.OpenPull(githubemu.Pull{HeadRef: "fork", HeadRepo: "mallory/r", HeadSHA: f.head, BaseRef: "main", Author: "mallory"})
	f.repo.Pulls = map[int]string{f.n: f.head}
	f.name = fmt.Sprintf("policies/web/experiments/pr-%d", f.n)
	f.start()
	eventually(t, "generation 1 staged", func() bool { _, ok := f.store.State().Generation(1); return ok })
	ready(t, f.store, 1, "n1")
	f.waitHead(f.head)
	return f
}

// start ends the running leader's term, if any, and runs a new leader
// (nothing but the replicated state carries over) with auto_start on, so
// a writer's pull request would start at once.
func (f *forkEnv) start() {
	if f.stop != nil {
		f.stop()
	}
	f.l = emuLoop(f.t, f.emu, forkToken, f.store, f.repo, f.stats, preview.Settings{AutoStart: true})
	if f.leaderNow != nil {
		f.l.cfg.Now = f.leaderNow
	}
	f.stop = runLoop(f.t, f.l)
}

func (f *forkEnv) find() *preview.Experiment {
	for _, e := range f.l.exps.List() {
		if e.Name == f.name {
			return e
		}
	}
	return nil
}

func (f *forkEnv) record() PullRecord { return ReadPullRecords(f.store.State())[f.n] }

// waitHead waits until the record and the experiment are at head.
func (f *forkEnv) waitHead(head string) {
	f.t.Helper()
	eventually(f.t, "the pull request recorded at "+short(head), func() bool {
		f.l.loop.Trigger()
		e := f.find()
		return f.record().HeadCommit == head && e != nil && e.Source.HeadCommit == head
	})
}

// push is mallory pushing files to the fork; it returns the head.
func (f *forkEnv) push(files map[string]string) string {
	head := f.repo.Commit("fork", files)
	f.repo.Mu.Lock()
	f.repo.Pulls[f.n] = head
	f.repo.Mu.Unlock()
	f.gh.UpdatePull(f.n, func(p *githubemu.Pull) { p.HeadSHA = head })
	f.waitHead(head)
	return head
}

// waitShown waits until the record says since when GitHub shows head in
// the preview comment.
func (f *forkEnv) waitShown(head string) {
	f.t.Helper()
	eventually(f.t, "the preview comment showing "+short(head), func() bool {
		rec := f.record()
		return rec.HeadCommit == head && rec.HeadShown == head
	})
}

// say is user's comment on the pull request, dated by GitHub's clock, as
// its webhook delivers it.
func (f *forkEnv) say(user, body string) webhook.Command {
	cmd, _ := webhook.ParseCommand(body)
	cmd.PR, cmd.User, cmd.CommentID = f.n, user, f.gh.AddComment(f.n, user, body)
	return cmd
}

// approve is alice reviewing the current head once the preview comment
// shows it and commenting /reconciler preview start a second later by
// GitHub's clock (whole seconds: the same second would be refused).
func (f *forkEnv) approve() {
	f.t.Helper()
	f.waitShown(f.record().HeadCommit)
	f.clock.Add(time.Second)
	f.l.runCommand(context.Background(), queuedCommand{cmd: f.say("alice", "/reconciler preview start")})
	if e := f.find(); !e.IsActive() {
		f.t.Fatalf("alice's approval of %s did not start the preview; replies %v", short(f.record().HeadCommit), f.replies())
	}
}

// replies are the bot's replies (not its preview comment).
func (f *forkEnv) replies() []string {
	var out []string
	for _, c := range f.gh.Comments(f.n) {
		if c.User != "alice" && c.User != "mallory" && !strings.HasPrefix(c.Body, forge.Marker) {
			out = append(out, c.Body)
		}
	}
	return out
}

func (f *forkEnv) lastReply() string {
	rs := f.replies()
	if len(rs) == 0 {
		return ""
	}
	return rs[len(rs)-1]
}

// assertHeld checks that the pull request at head is held: its
// experiment does not run, and its comment and reconciler/preview status
// ask a writer to approve that head.
func (f *forkEnv) assertHeld(head, why string) {
	f.t.Helper()
	rec := f.record()
	if e := f.find(); e.IsActive() || rec.Preview != string(preview.Suspended) || !held(rec) {
		f.t.Fatalf("%s: experiment active %v at %s, record %s approved %s; want held", why, e.IsActive(),
			short(e.Source.HeadCommit), rec.Preview, short(rec.ApprovedHead))
	}
	body := commentBody(rec, f.l.pullSummaries(rec))
	if !strings.Contains(body, "Preview held") || !strings.Contains(body, "head `"+short(head)+"`") {
		f.t.Fatalf("%s: the comment does not ask for an approval of %s:\n%s", why, short(head), body)
	}
	if state, desc := previewStatus(rec, f.l.pullSummaries(rec)); state != forge.StatePending || !strings.Contains(desc, short(head)) {
		f.t.Fatalf("%s: reconciler/preview %s %q", why, state, desc)
	}
}

// A pull request from a user without write permission (a fork's) is
// recorded SUSPENDED: its experiment is not previewed until a writer
// comments /reconciler preview start, and its comment shows counts and
// rule names but no sample request, which a writer's pull request shows.
func TestForkPullPreviewWaitsForWriter(t *testing.T) {
	planted := "/planted-sample-LIVE-SECRET"
	var mu sync.Mutex
	var exp *preview.Experiment
	stats := func() []preview.Stats {
		mu.Lock()
		defer mu.Unlock()
		if exp == nil {
			return nil
		}
		return []preview.Stats{{Experiment: exp.Name, ExperimentEtag: exp.Etag,
			Tally: preview.Tally{Counts: preview.Counts{Evaluated: 10, Unchanged: 9, AllowToDeny: 1},
				Transitions: []preview.Transition{{LiveRule: "v1", ExperimentRule: "v2", LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: 1}}},
			Samples: []preview.Sample{{LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, ExperimentRule: "v2", Request: map[string]any{"path": planted}}}}}
	}
	f := newForkEnv(t, stats)
	rec := f.record()
	if rec.Writer {
		t.Fatal("mallory's pull request recorded as a writer's")
	}
	f.assertHeld(f.head, "opened")
	mu.Lock()
	exp = f.find()
	mu.Unlock()
	body := commentBody(rec, f.l.pullSummaries(rec))
	if strings.Contains(body, planted) || strings.Contains(body, "Sample changes") || !strings.Contains(body, "`v2`") {
		t.Fatalf("the fork's comment shows samples or no rule:\n%s", body)
	}
	writer := rec
	writer.Writer = true
	if body := commentBody(writer, f.l.pullSummaries(writer)); !strings.Contains(body, planted) {
		t.Fatalf("a writer's pull request's comment has no sample:\n%s", body)
	}
	f.clock.Set(time.Minute)
	f.l.runCommand(context.Background(), queuedCommand{cmd: f.say("mallory", "/reconciler preview start")})
	if f.find().IsActive() {
		t.Fatal("the fork's author started its own preview")
	}
	f.approve()
	if rec := f.record(); rec.ApprovedHead != f.head || rec.ApprovedBy != "alice" || held(rec) {
		t.Fatalf("record after the approval: %+v", rec)
	}
}

// Issue 16: a writer's approval covers the head the writer saw, not later
// pushes. A push after the approval stops the preview and holds the pull
// request again, whether it changes the policy or only the commit; a new
// approval of the new head resumes it. The approval is in the replicated
// record, so a new leader keeps it and still holds the next push.
func TestForkApprovalCoversOneHead(t *testing.T) {
	f := newForkEnv(t, nil)
	f.approve()

	// mallory pushes a rule that tests a hidden value: held, not run.
	head2 := f.push(webPolicy("v3"))
	f.assertHeld(head2, "a new policy pushed after the approval")
	if body := commentBody(f.record(), nil); !strings.Contains(body, "approved `"+short(f.head)+"`; that approval does not cover the new head") {
		t.Fatalf("the comment does not say the approval was for the old head:\n%s", body)
	}
	f.approve()

	// The same policy at a new commit: the experiment's etag is the same,
	// its preview stops all the same.
	head3 := f.push(webPolicy("v3"))
	f.assertHeld(head3, "a new commit with the same policy")

	// A new leader: the approval of head3 counts, the next push is held.
	f.approve()
	f.start()
	f.waitHead(head3)
	if !f.find().IsActive() || held(f.record()) {
		t.Fatalf("after a leader change the approved head is no longer previewed: %+v", f.record())
	}
	head4 := f.push(webPolicy("v4"))
	f.assertHeld(head4, "a push after a leader change")
}

// An approval written for one head never approves another: a comment
// GitHub dates before the preview comment showed the current head (its
// delivery came late), or one received at an older head and retried after
// a rate limit while a push came in, starts nothing and says why.
func TestForkApprovalBoundToWrittenHead(t *testing.T) {
	f := newForkEnv(t, nil)
	ctx := context.Background()

	f.clock.Set(-time.Minute) // alice approves the first head…
	late := f.say("alice", "/reconciler preview start")
	head2 := f.push(webPolicy("v3")) // …mallory pushes, the comment shows it, then the webhook arrives
	f.waitShown(head2)
	f.l.runCommand(ctx, queuedCommand{cmd: late})
	if r := f.lastReply(); f.find().IsActive() || !strings.Contains(r, "written before the preview comment showed the head "+short(head2)) {
		t.Fatalf("a late approval: active %v, reply %q", f.find().IsActive(), r)
	}
	f.assertHeld(head2, "a late approval")

	// alice approves head2; GitHub rate-limits the leader's permission
	// call; mallory pushes meanwhile; the retry finds the head moved. The
	// term is ended first so that the test, not the worker, runs the retry.
	f.stop()
	f.stop = nil
	first := f.l
	f.clock.Set(time.Minute)
	f.emu.Inject(githubemu.Fault{Kind: githubemu.TooManyRequests, Method: "GET", Path: "/permission", RetryAfter: time.Second})
	first.runCommand(ctx, queuedCommand{cmd: f.say("alice", "/reconciler preview start")})
	f.start()
	head3 := f.push(webPolicy("v4"))
	var q queuedCommand
	select {
	case q = <-first.commands:
	case <-time.After(30 * time.Second):
		t.Fatal("the rate-limited approval was not queued again")
	}
	f.l.runCommand(ctx, q)
	if r := f.lastReply(); f.find().IsActive() || !strings.Contains(r, "moved from "+short(head2)+" to "+short(head3)) {
		t.Fatalf("a delayed approval: active %v, reply %q", f.find().IsActive(), r)
	}
	f.assertHeld(head3, "a delayed approval")
	f.approve()
}

// Only a writer's approval starts a fork's preview: the API's
// :startPreview is refused while the head is unapproved, and a record
// approved before approvals were bound to a head (no approvedHead) stops
// its running experiment at the first pass after the upgrade, though
// nothing moved.
func TestForkPreviewRunsOnlyApproved(t *testing.T) {
	f := newForkEnv(t, nil)
	ctx := context.Background()
	_, err := f.l.exps.StartPreview(ctx, f.name)
	if code, _ := preview.CodeOf(err); code != preview.FailedPrecondition || f.find().IsActive() {
		t.Fatalf("the API started an unapproved fork's preview: %v", err)
	}
	f.approve()

	old := f.record() // as a node before this change recorded an approval
	old.ApprovedHead, old.ApprovedBy, old.Preview = "", "", string(preview.Active)
	if _, err := f.store.Propose(ctx, &raftstore.PutPull{Record: old}); err != nil {
		t.Fatal(err)
	}
	f.start() // the upgrade restarts the nodes: a new term's first pass
	eventually(t, "the unapproved experiment stopped", func() bool { return !f.find().IsActive() })
	f.assertHeld(f.head, "a record without an approved head")
}

// A new leader's first pass, before its worker could list the open pull
// requests, leaves their experiments as they are: it used to delete them
// (as if every pull request had closed) and create them again, so an
// approved fork's preview, or any preview started by command, was lost
// without auto_start.
func TestLeaderChangeKeepsPullExperiments(t *testing.T) {
	f := newForkEnv(t, nil)
	f.approve()
	before := f.find()
	f.stop()
	f.stop = nil
	f.emu.Inject(githubemu.Fault{Kind: githubemu.ServerError, Method: "GET", Path: "/pulls", Times: 1 << 30})
	mark := f.repo.Fetches()
	f.start()
	eventually(t, "two passes of the new leader", func() bool { f.l.loop.Trigger(); return f.repo.Fetches() >= mark+2 })
	after := f.find()
	if after == nil || !after.CreateTime.Equal(before.CreateTime) || !after.IsActive() {
		t.Fatalf("the approved experiment after a leader change: %+v (was created %v)", after, before.CreateTime)
	}
}
