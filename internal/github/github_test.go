package github

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/webhook"
)

type (
	fakeStore    = leadertest.Store
	fakeRepo     = leadertest.Repo
	fixedMembers = leadertest.FixedMembers
)

var (
	newFakeStore = leadertest.NewStore
	newFakeRepo  = leadertest.NewRepo
	webPolicy    = leadertest.WebPolicy
	eventually   = leadertest.Eventually
	ready        = leadertest.Ready
)

// fakeForge is GitHub as the leader's worker sees it, recording calls.
type fakeForge struct {
	mu sync.Mutex
	// listErr, when set, fails OpenPullRequests.
	listErr  error
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
	if f.listErr != nil {
		return nil, f.listErr
	}
	return append([]forge.PullRequest(nil), f.pulls...), nil
}

func (f *fakeForge) UpsertComment(_ context.Context, _ int, body string) (forge.PostedComment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upserts = append(f.upserts, body)
	return forge.PostedComment{ID: 1, UpdatedAt: time.Now().UTC().Truncate(time.Second)}, nil
}

func (f *fakeForge) ShowComment(ctx context.Context, pr int, body string) (forge.PostedComment, error) {
	return f.UpsertComment(ctx, pr, body)
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

// leader is the leader's three parts wired as internal/node wires them,
// with the GitHub worker's methods at hand.
type leader struct {
	*Worker
	loop *reconcile.Loop
	exps *experiments.Service
}

// ghLoop is a leader with [github] on fg over store.
func ghLoop(t *testing.T, store *fakeStore, repo *fakeRepo, fg *fakeForge, stats func() []preview.Stats) *leader {
	t.Helper()
	return ghLoopOn(t, store, repo, fg, stats, preview.Settings{})
}

// ghLoopOn is ghLoop on any Forge, with the [preview] settings set.
func ghLoopOn(t *testing.T, store *fakeStore, repo *fakeRepo, fg interface {
	Forge
	reconcile.PullRequestOpener
}, stats func() []preview.Stats, set preview.Settings) *leader {
	t.Helper()
	l := &leader{}
	log := testlog.New(t)
	lopts := policy.LoadOptions{MergeDefault: policy.StrategyFail}
	l.exps = experiments.New(experiments.Config{Store: store, Leader: loopRef{l}, Pulls: workerRef{l}, Preview: set,
		LoadOptions: lopts, EngineOptions: engine.DefaultOptions(), Logger: log})
	w, err := New(Config{Forge: fg, Store: store, Examiner: loopRef{l}, Experiments: l.exps, Trigger: loopRef{l}.Trigger,
		Summary: "@every 1h", RetryAfter: 10 * time.Millisecond, Stats: stats, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l.Worker = w
	l.loop, err = reconcile.New(reconcile.Config{Store: store, Members: fixedMembers{"n1"}, Source: repo,
		Poll: "@every 1h", URL: "https://example.com/p.git", LoadOptions: lopts, EngineOptions: engine.DefaultOptions(),
		Logger: log, CheckInterval: 10 * time.Millisecond, Experiments: l.exps, Pulls: w, PullRequests: fg,
		Beside: []lifecycle.Part{w}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// loopRef and workerRef let the parts be built one after the other.
type loopRef struct{ l *leader }

func (r loopRef) Leading() bool { return r.l.loop.Leading() }
func (r loopRef) Trigger()      { r.l.loop.Trigger() }
func (r loopRef) WaitForCommit(ctx context.Context, commit string, wait time.Duration) raftstore.Generation {
	return r.l.loop.Rollbacks().WaitForCommit(ctx, commit, wait)
}
func (r loopRef) Examine(head, main gitsource.Revision) (reconcile.Examination, error) {
	return r.l.loop.Trees().Examine(head, main)
}
func (r loopRef) GenerationOf(st *raftstore.State, commit string) (raftstore.Generation, bool) {
	return r.l.loop.Rollbacks().GenerationOf(st, commit)
}

func (r loopRef) LiveAncestor(st *raftstore.State, commit string) bool {
	return r.l.loop.Rollbacks().LiveAncestor(st, commit)
}

func (r loopRef) Diverged() *reconcile.Divergence { return r.l.loop.Diverged() }
func (r loopRef) SourceFiles(main, head string) (map[string][]byte, string, error) {
	return r.l.loop.Trees().SourceFiles(main, head)
}
func (r loopRef) CommitToMain(ctx context.Context, e *preview.Experiment, msg string) (string, error) {
	return r.l.loop.Committer().CommitToMain(ctx, e, msg)
}
func (r loopRef) WithValidation(e *preview.Experiment) *preview.Experiment {
	return r.l.loop.Committer().WithValidation(e)
}

type workerRef struct{ l *leader }

func (r workerRef) MergePullRequest(ctx context.Context, n int, head string) (string, error) {
	return r.l.MergePullRequest(ctx, n, head)
}
func (r workerRef) PullInvalid(n int, head string) bool    { return r.l.PullInvalid(n, head) }
func (r workerRef) PullUnapproved(n int, head string) bool { return r.l.PullUnapproved(n, head) }

// runLoop runs l as one leadership term; the returned func ends it.
func runLoop(t *testing.T, l *leader) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.loop.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// putPull records pull request n at head as the reconcile pass would,
// its preview comment showing head since an hour ago.
func putPull(t *testing.T, store *fakeStore, n int, head string) {
	t.Helper()
	p := &raftstore.PutPull{Record: PullRecord{Number: n, HeadCommit: head,
		ChangedPolicies: []string{}, Validation: reconcile.BranchValidation{Valid: true}, Preview: "ACTIVE",
		HeadShown: head, HeadShownAt: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)}}
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
			case q := <-l.commands:
				l.runCommand(ctx, q)
			}
		}
	}()
	l.commands <- queuedCommand{cmd: fg.say(3, "alice", 9, "/reconciler help")}
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
	repo.Commit("main", webPolicy("v1"))
	head := repo.Commit("pr-branch", webPolicy("v2"))
	repo.Pulls = map[int]string{5: head}
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
		for _, e := range l.exps.List() {
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
	pass := func() int {
		_, _, before := fg.calls()
		l.pullStatuses(ctx, w, store.State(), func(string, error) {})
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

// Experiments pr-N follow the pull request: opened → created, base edited
// away from the live branch → deleted, base edited back (or reopened) →
// created again, closed → deleted with its record.
func TestPullExperimentFollowsBaseAndState(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	repo.Commit("main", webPolicy("v1"))
	head := repo.Commit("pr-branch", webPolicy("v2"))
	repo.Pulls = map[int]string{5: head}
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
		for _, e := range l.exps.List() {
			if e.Name == "policies/web/experiments/pr-5" {
				exp = true
			}
		}
		return exp, rec
	}
	want := func(what string, exp, rec bool) {
		t.Helper()
		eventually(t, what, func() bool {
			l.loop.Trigger()
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

// The worker reports itself for /v1/status: STOPPED outside a leadership
// term (and it takes no command then), WARN while GitHub calls fail, OK
// once they succeed again.
func TestWorkerStatus(t *testing.T) {
	store, repo, fg := newFakeStore(), newFakeRepo(), newFakeForge()
	repo.Commit("main", webPolicy("v1"))
	fg.listErr = errors.New("GitHub is down")
	l := ghLoop(t, store, repo, fg, nil)
	if s := l.Status(); s.State != lifecycle.Stopped {
		t.Fatalf("before a term: %+v", s)
	}
	if err := l.EnqueueCommand(webhook.Command{PR: 1, Verb: webhook.VerbHelp}); !errors.Is(err, raftstore.ErrNotLeader) {
		t.Fatalf("a command off the leader: %v", err)
	}
	stop := runLoop(t, l)
	eventually(t, "WARN while GitHub fails", func() bool {
		s := l.Status()
		return s.State == lifecycle.Warn && strings.Contains(s.Message, "GitHub is down")
	})
	fg.mu.Lock()
	fg.listErr = nil
	fg.mu.Unlock()
	eventually(t, "OK once GitHub answers", func() bool { return l.Status().State == lifecycle.OK })
	stop()
	if s := l.Status(); s.State != lifecycle.Stopped {
		t.Fatalf("after the term: %+v", s)
	}
}
