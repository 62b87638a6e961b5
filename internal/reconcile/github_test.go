package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// fakeForge is GitHub as the leader's worker sees it, recording calls.
type fakeForge struct {
	mu       sync.Mutex
	pulls    []forge.PullRequest
	perms    map[string]string
	merges   []string // "N@sha"
	replies  []string
	upserts  []string // bodies, in order
	statuses map[string]string
	// replyErrs fail the next Comment calls, one each.
	replyErrs []error
	// comments are the users' comments GetComment finds (say adds one).
	comments map[int64]forge.IssueComment
}

var _ Forge = (*fakeForge)(nil)

func newFakeForge() *fakeForge {
	return &fakeForge{perms: map[string]string{"alice": forge.PermWrite, "bob": forge.PermRead},
		statuses: map[string]string{}, comments: map[int64]forge.IssueComment{}}
}

// say records user's comment id on pull request pr and returns the
// command a webhook delivery of it carries.
func (f *fakeForge) say(pr int, user string, id int64, body string) webhook.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.comments[id] = forge.IssueComment{ID: id, PR: pr, User: user, Body: body, CreatedAt: time.Now()}
	cmd, _ := webhook.ParseCommand(body)
	cmd.PR, cmd.User, cmd.CommentID = pr, user, id
	return cmd
}

func (f *fakeForge) GetComment(_ context.Context, id int64) (forge.IssueComment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.comments[id]; ok {
		return c, nil
	}
	return forge.IssueComment{}, fmt.Errorf("%w: comment %d", forge.ErrNotFound, id)
}

func (f *fakeForge) OpenPullRequests(context.Context, string) ([]forge.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forge.PullRequest(nil), f.pulls...), nil
}

func (f *fakeForge) UpsertComment(_ context.Context, _ int, body string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upserts = append(f.upserts, body)
	return 1, nil
}

func (f *fakeForge) Comment(_ context.Context, _ int, body string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.replyErrs) > 0 {
		err := f.replyErrs[0]
		f.replyErrs = f.replyErrs[1:]
		return 0, err
	}
	f.replies = append(f.replies, body)
	return int64(len(f.replies)), nil
}

func (f *fakeForge) SetStatus(_ context.Context, sha, c, state, _, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[sha+" "+c] = state
	return nil
}

func (f *fakeForge) Merge(_ context.Context, n int, sha, _ string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.merges = append(f.merges, fmt.Sprintf("%d@%s", n, sha))
	return strings.Repeat("m", 40), nil
}

func (f *fakeForge) Permission(_ context.Context, user string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.perms[user]; ok {
		return p, nil
	}
	return forge.PermNone, nil
}

func (f *fakeForge) CreatePullRequest(context.Context, string, string, string, string) (forge.PullRequest, error) {
	return forge.PullRequest{}, fmt.Errorf("%w: not in this test", forge.ErrFailedPrecondition)
}

// calls returns copies of what was merged, replied and upserted.
func (f *fakeForge) calls() (merges, replies, upserts []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.merges...), append([]string(nil), f.replies...), append([]string(nil), f.upserts...)
}

// ghLoop is a loop with [github] on fg over store.
func ghLoop(t *testing.T, store *fakeStore, repo *fakeRepo, fg *fakeForge, stats func() []preview.Stats) *Loop {
	t.Helper()
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	gh, err := newGitHub(&GitHubConfig{Forge: fg, Summary: "@every 1h", RetryAfter: 10 * time.Millisecond, Stats: stats},
		l.log)
	if err != nil {
		t.Fatal(err)
	}
	l.gh = gh
	return l
}

// putPull records pull request n at head as the reconcile pass would.
func putPull(t *testing.T, store *fakeStore, n int, head string) {
	t.Helper()
	p := &raftstore.PutPull{Record: PullRecord{Number: n, HeadCommit: head,
		ChangedPolicies: []string{}, Validation: BranchValidation{Valid: true}, Preview: "ACTIVE"}}
	if _, err := store.Propose(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// A comment command runs once even when its webhook reaches a new leader
// after the old one ran it (GitHub redelivers a delivery that timed out):
// the claim is in the replicated state, not in the old leader's memory.
func TestCommandRunsOnceAcrossLeaders(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	head := strings.Repeat("h", 40)
	putPull(t, store, 7, head)
	cmd := fg.say(7, "alice", 4242, "/reconciler commit")
	ctx := context.Background()

	first := ghLoop(t, store, repo, fg, nil)
	first.runCommand(ctx, queuedCommand{cmd: cmd})
	first.runCommand(ctx, queuedCommand{cmd: cmd}) // redelivered to the same leader
	second := ghLoop(t, store, repo, fg, nil)      // a new leader, nothing in memory
	second.runCommand(ctx, queuedCommand{cmd: cmd})

	merges, replies, _ := fg.calls()
	if len(merges) != 1 || merges[0] != "7@"+head {
		t.Fatalf("merges %v, want one of #7 at the previewed head", merges)
	}
	if len(replies) != 1 || !strings.HasPrefix(replies[0], "Merged #7") {
		t.Fatalf("replies %q", replies)
	}
	recs := ReadCommandRecords(store.State())
	if len(recs) != 1 || recs[0].CommentID != 4242 || recs[0].PR != 7 || recs[0].Verb != webhook.VerbCommit {
		t.Fatalf("claims %+v", recs)
	}

	// Another comment is another command; a refusal is claimed as well.
	byBob := fg.say(7, "bob", 4243, "/reconciler commit")
	second.runCommand(ctx, queuedCommand{cmd: byBob})
	first.runCommand(ctx, queuedCommand{cmd: byBob})
	if merges, replies, _ = fg.calls(); len(merges) != 1 || len(replies) != 2 || !strings.Contains(replies[1], "@bob, sorry") {
		t.Fatalf("after a reader's command: merges %v replies %q", merges, replies)
	}
}

// A reply GitHub rate-limits is retried by the leader that claimed the
// command, although the claim is already recorded, and posted once.
func TestCommandRetriedAfterRateLimit(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	putPull(t, store, 3, strings.Repeat("a", 40))
	fg.replyErrs = []error{&forge.ErrRateLimited{Until: time.Now().Add(50 * time.Millisecond)}}
	l := ghLoop(t, store, repo, fg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case q := <-l.gh.commands:
				l.runCommand(ctx, q)
			}
		}
	}()
	l.gh.commands <- queuedCommand{cmd: fg.say(3, "alice", 9, "/reconciler help")}
	eventually(t, "the reply after the rate limit", func() bool {
		_, replies, _ := fg.calls()
		return len(replies) == 1
	})
	cancel()
	<-done
	if _, replies, _ := fg.calls(); len(replies) != 1 || !strings.Contains(replies[0], "/reconciler preview start") {
		t.Fatalf("replies %q", replies)
	}
}

// Closing a pull request deletes its claims; the claims stay bounded.
func TestCommandClaimsPruned(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	l := ghLoop(t, store, repo, fg, nil)
	ctx := context.Background()
	for i := range maxCommandRecords + 5 {
		if ok, err := l.claimCommand(ctx, webhook.Command{PR: 1 + i%2, CommentID: int64(100 + i), Verb: webhook.VerbHelp}); !ok || err != nil {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
	}
	recs := ReadCommandRecords(store.State())
	if len(recs) != maxCommandRecords || recs[0].CommentID != 105 {
		t.Fatalf("%d claims, oldest %d; want %d, oldest 105", len(recs), recs[0].CommentID, maxCommandRecords)
	}
	l.pruneCommandRecords(ctx, map[int]bool{1: true})
	for _, r := range ReadCommandRecords(store.State()) {
		if r.PR == 1 {
			t.Fatalf("claim %+v of the closed pull request kept", r)
		}
	}
	if n := len(ReadCommandRecords(store.State())); n != maxCommandRecords/2 {
		t.Fatalf("%d claims left, want %d", n, maxCommandRecords/2)
	}
}

// The comment is edited at once when something material changes (head,
// etags, validity, preview state, counts crossing a power of two) and
// otherwise only when the preview.summary schedule fired and the body
// differs — never on every request.
func TestCommentRefreshMaterialOrSchedule(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	repo.commit("main", webPolicy("v1"))
	head := repo.commit("pr-branch", webPolicy("v2"))
	repo.pulls = map[int]string{5: head}
	fg.pulls = []forge.PullRequest{{Number: 5, Title: "v2", HeadSHA: head, BaseRef: "main", State: "open", Author: "alice"}}
	var mu sync.Mutex
	var counts preview.Counts
	var exp *preview.Experiment
	stats := func() []preview.Stats {
		mu.Lock()
		defer mu.Unlock()
		if exp == nil {
			return nil
		}
		return []preview.Stats{{Experiment: exp.Name, ExperimentEtag: exp.Etag, Tally: preview.Tally{Counts: counts}}}
	}
	l := ghLoop(t, store, repo, fg, stats)
	stop := runLoop(t, l)
	eventually(t, "generation 1 staged", func() bool { _, ok := store.State().Generation(1); return ok })
	ready(t, store, 1, "n1")
	eventually(t, "experiment pr-5", func() bool {
		for _, e := range l.experiments(store.State()) {
			if e.Name == "policies/web/experiments/pr-5" {
				mu.Lock()
				exp = e
				mu.Unlock()
				return true
			}
		}
		return false
	})
	stop()

	ctx := context.Background()
	w := &ghTerm{promote: map[string]string{}, validate: map[string]string{}, preview: map[string]string{},
		comments: map[int]commentState{}}
	st := store.State()
	pass := func() int {
		_, _, before := fg.calls()
		l.pullStatuses(ctx, w, st, func(string, error) {})
		_, _, after := fg.calls()
		return len(after) - len(before)
	}
	set := func(evaluated, allowToDeny uint64) {
		mu.Lock()
		defer mu.Unlock()
		counts = preview.Counts{Evaluated: evaluated, Unchanged: evaluated - allowToDeny, AllowToDeny: allowToDeny}
	}
	set(100, 10)
	if n := pass(); n != 1 {
		t.Fatalf("first pass: %d edits, want the comment posted", n)
	}
	set(101, 11) // same powers of two: not material
	if n := pass(); n != 0 {
		t.Fatalf("%d edits for a small change before the schedule", n)
	}
	w.due.Store(true) // the schedule fired
	if n := pass(); n != 1 {
		t.Fatalf("%d edits when the schedule fired with a new body", n)
	}
	if _, _, up := fg.calls(); !strings.Contains(up[len(up)-1], "101") {
		t.Fatalf("the scheduled edit does not show the new counts:\n%s", up[len(up)-1])
	}
	w.due.Store(true)
	if n := pass(); n != 0 {
		t.Fatalf("%d edits when the schedule fired with the same body", n)
	}
	w.due.Store(false)
	set(300, 40) // evaluated and ALLOW→DENY cross powers of two: material
	if n := pass(); n != 1 {
		t.Fatalf("%d edits for a material change", n)
	}
}

// Operations are bounded: done ones expire after OperationRetention, the
// oldest beyond MaxDoneOperations go, and one left running by a leader
// that stopped is completed as UNAVAILABLE after the commit wait.
func TestPruneOperations(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l.cfg.Now = func() time.Time { return now }
	ctx := context.Background()
	put := func(id string, created time.Time, done bool) {
		op := preview.NewOperation(id, preview.MethodCommit, "policies/web/experiments/e", created)
		if done {
			op, _ = op.Succeed(nil, created.Add(time.Second))
		}
		if err := l.putOperation(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	put("expired", now.Add(-25*time.Hour), true)
	put("orphan", now.Add(-DefaultCommitWait-2*time.Minute), false)
	put("running", now.Add(-time.Second), false)
	for i := range MaxDoneOperations + 3 {
		put(fmt.Sprintf("done-%04d", i), now.Add(-time.Hour+time.Duration(i)*time.Second), true)
	}
	tm := &term{}
	l.pruneOperations(ctx, tm)
	ops := store.State().Operations
	for _, gone := range []string{"expired", "done-0000", "done-0001", "done-0002"} {
		if _, ok := ops[gone]; ok {
			t.Errorf("operation %s kept", gone)
		}
	}
	for _, kept := range []string{"running", "done-0003", fmt.Sprintf("done-%04d", MaxDoneOperations+2)} {
		if _, ok := ops[kept]; !ok {
			t.Errorf("operation %s deleted", kept)
		}
	}
	orphan, err := preview.DecodeOperation(ops["orphan"].Data)
	if err != nil || !orphan.Done || orphan.Error == nil || orphan.Error.Code != int(preview.Unavailable) {
		t.Fatalf("orphaned operation %+v %v", orphan, err)
	}

	// Scans are spaced: a second pass within a minute proposes nothing.
	before := store.total()
	put("expired-2", now.Add(-48*time.Hour), true)
	l.pruneOperations(ctx, tm)
	if store.total() != before+1 {
		t.Fatal("a second scan within pruneEvery")
	}
	now = now.Add(pruneEvery + time.Second)
	l.pruneOperations(ctx, tm)
	if _, ok := store.State().Operations["expired-2"]; ok {
		t.Fatal("expired-2 kept by the next scan")
	}
	// The orphan, now done, made one done operation too many: the oldest went.
	if _, ok := store.State().Operations["done-0003"]; ok || len(store.State().Operations) != MaxDoneOperations+1 {
		t.Fatalf("%d operations after the second scan, want %d done and one running", len(store.State().Operations),
			MaxDoneOperations)
	}
	if store.count(raftstore.TypeDeleteOperation) != 6 {
		t.Fatalf("%d deletes, want 6", store.count(raftstore.TypeDeleteOperation))
	}
}

// Experiments pr-N follow the pull request: opened → created, base edited
// away from the live branch → deleted, base edited back (or reopened) →
// created again, closed → deleted with its record.
func TestPullExperimentFollowsBaseAndState(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	repo.commit("main", webPolicy("v1"))
	head := repo.commit("pr-branch", webPolicy("v2"))
	repo.pulls = map[int]string{5: head}
	open := forge.PullRequest{Number: 5, Title: "v2", HeadSHA: head, BaseRef: "main", State: "open", Author: "alice"}
	setPulls := func(ps ...forge.PullRequest) {
		fg.mu.Lock()
		fg.pulls = ps
		fg.mu.Unlock()
	}
	setPulls(open)
	l := ghLoop(t, store, repo, fg, nil)
	runLoop(t, l)
	eventually(t, "generation 1 staged", func() bool { _, ok := store.State().Generation(1); return ok })
	ready(t, store, 1, "n1")
	has := func() (exp, rec bool) {
		st := store.State()
		_, rec = ReadPullRecords(st)[5]
		for _, e := range l.experiments(st) {
			if e.Name == "policies/web/experiments/pr-5" {
				exp = true
			}
		}
		return exp, rec
	}
	want := func(what string, exp, rec bool) {
		t.Helper()
		eventually(t, what, func() bool {
			l.Trigger()
			e, r := has()
			return e == exp && r == rec
		})
	}
	want("opened: experiment and record", true, true)
	retargeted := open
	retargeted.BaseRef = "release"
	setPulls(retargeted)
	want("base edited away: both gone", false, false)
	setPulls(open)
	want("base edited back: both again", true, true)
	setPulls()
	want("closed: both gone", false, false)
	setPulls(open)
	want("reopened: both again", true, true)
}
