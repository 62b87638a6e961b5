package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// webPolicy is a valid tree whose rule names its version.
func webPolicy(rule string) map[string]string {
	return map[string]string{"web/policy.toml": fmt.Sprintf(`default_action = "deny"
[[rules]]
name = %q
priority = 1
action = "allow"
match = 'request.path == "/%s"'
[[tests]]
name = "allowed"
request = { path = "/%s" }
expect = "allow"
`, rule, rule, rule)}
}

// brokenPolicy does not compile (a typo in a field name).
var brokenPolicy = map[string]string{"web/policy.toml": "default_action = \"deny\"\n[[rules]]\nname = \"x\"\npriority = 1\naction = \"allow\"\nmatch = 'request.pth == \"/\"'\n"}

// startLoop runs a leader loop until the test ends.
func startLoop(t *testing.T, store *fakeStore, src Source, members Members) *Loop {
	t.Helper()
	l := newLoop(t, store, src, members)
	runLoop(t, l)
	return l
}

func newLoop(t *testing.T, store *fakeStore, src Source, members Members) *Loop {
	t.Helper()
	l, err := New(Config{Store: store, Members: members, Source: src, Poll: "@every 1h", URL: "https://example.com/p.git",
		LoadOptions: policy.LoadOptions{MergeDefault: policy.StrategyFail}, EngineOptions: engine.DefaultOptions(),
		Registry: prometheus.NewRegistry(), Logger: testlog.New(t), CheckInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// runLoop runs l as one leadership term; the returned func ends it.
func runLoop(t *testing.T, l *Loop) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ready(t *testing.T, s *fakeStore, gen uint64, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		if _, err := s.Propose(context.Background(), &raftstore.ReportReady{Generation: gen, NodeID: n}); err != nil {
			t.Fatal(err)
		}
	}
}

// gen returns generation n, failing the test when it is not there.
func gen(t *testing.T, s *fakeStore, n uint64) raftstore.Generation {
	t.Helper()
	g, ok := s.State().Generation(n)
	if !ok {
		t.Fatalf("no generation %d", n)
	}
	return g
}

// settle triggers the loop and waits until a pass that began after the
// trigger has finished (its proposals included). Two passes are awaited
// because a pass already running when Trigger is called may have fetched
// before the test's change.
func settle(t *testing.T, l *Loop, _ *fakeRepo) {
	t.Helper()
	before := l.passes.Load()
	l.Trigger()
	eventually(t, "a pass", func() bool { return l.passes.Load() >= before+1 })
	l.Trigger()
	eventually(t, "a second pass", func() bool { return l.passes.Load() >= before+2 })
}

func TestLoopStagesThenActivatesWhenAllReady(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	c1 := repo.commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{"n1", "n2"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	g := gen(t, store, 1)
	if g.Commit != c1 || g.Etags["web"] == "" || len(g.Files["web/policy.toml"]) == 0 {
		t.Errorf("staged = %+v", g)
	}
	ready(t, store, 1, "n1")
	time.Sleep(50 * time.Millisecond)
	if store.State().Active != 0 {
		t.Fatal("activated before every required node was ready")
	}
	ready(t, store, 1, "n2")
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	// Idle polls: no new generation, and no raft write at all.
	writes := store.total()
	for range 3 {
		settle(t, l, repo)
	}
	if st := store.State(); st.Highest != 1 || store.total() != writes {
		t.Errorf("highest %d, %d writes during idle polls", st.Highest, store.total()-writes)
	}
	if s := l.Status(); s.Commit != c1 || s.Error != "" {
		t.Errorf("status = %+v", s)
	}
}

// TestLoopEveryCommitInOrder pushes several commits between two passes:
// each invalid one is recorded INVALID in order, the newest valid one is
// staged, older valid ones are superseded before staging, and commits
// that change no policy make no generation.
func TestLoopEveryCommitInOrder(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", webPolicy("v0"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })

	repo.commit("main", webPolicy("v1"))                        // valid, superseded by c4
	c2 := repo.commit("main", brokenPolicy)                     // invalid: generation 2
	c3 := repo.commit("main", map[string]string{"README": "x"}) // main still broken: generation 3 INVALID
	c4 := repo.commit("main", webPolicy("v4"))                  // valid: generation 4
	c5 := repo.commit("main", map[string]string{"README": "y"}) // no policy change: no generation
	l.Trigger()
	eventually(t, "generation 4 active", func() bool { return store.State().Active == 4 })
	for n, want := range map[uint64]struct {
		commit string
		state  raftstore.GenerationState
	}{2: {c2, raftstore.GenerationInvalid}, 3: {c3, raftstore.GenerationInvalid}, 4: {c4, raftstore.GenerationActive}} {
		if g := gen(t, store, n); g.Commit != want.commit || g.State != want.state {
			t.Errorf("generation %d = %s %s, want %s %s", n, g.Commit, g.State, want.commit, want.state)
		}
	}
	if g := gen(t, store, 2); len(g.LeaderErrors) == 0 || !strings.Contains(g.LeaderErrors[0], "pth") {
		t.Errorf("errors of generation 2 = %q", g.LeaderErrors)
	}
	if st := store.State(); st.Highest != 4 || store.count(raftstore.TypeStageGeneration) != 2 {
		t.Errorf("highest %d, %d stages", st.Highest, store.count(raftstore.TypeStageGeneration))
	}
	if s := l.Status(); s.Commit != c5 {
		t.Errorf("status commit = %s, want the head %s", s.Commit, c5)
	}
	// The newest valid commit before an invalid head is staged, then the
	// head is recorded INVALID; the valid one still activates.
	c6 := repo.commit("main", webPolicy("v6"))
	c7 := repo.commit("main", brokenPolicy)
	l.Trigger()
	// Generation 6 (the invalid head) is recorded after 5 is activated.
	eventually(t, "generation 5 active and 6 recorded", func() bool {
		st := store.State()
		_, ok := st.Generations[6]
		return st.Active == 5 && ok
	})
	if g5, g6 := gen(t, store, 5), gen(t, store, 6); g5.Commit != c6 || g6.Commit != c7 || g6.State != raftstore.GenerationInvalid {
		t.Errorf("generations 5, 6 = %+v, %+v", g5, g6)
	}
}

func TestLoopInvalidTreesKeepNumbersGrowing(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", brokenPolicy)
	l := startLoop(t, store, repo, fixedMembers{"n1"})
	eventually(t, "generation 1 invalid", func() bool {
		g, ok := store.State().Generation(1)
		return ok && g.State == raftstore.GenerationInvalid
	})
	if g := gen(t, store, 1); len(g.LeaderErrors) != 1 || !strings.HasPrefix(g.LeaderErrors[0], "web/policy.toml:") {
		t.Errorf("errors = %q", g.LeaderErrors)
	}
	failing := webPolicy("b")
	failing["web/policy.toml"] = strings.Replace(failing["web/policy.toml"], `expect = "allow"`, `expect = "deny"`, 1)
	repo.commit("main", failing)
	l.Trigger()
	eventually(t, "generation 2 invalid", func() bool {
		g, ok := store.State().Generation(2)
		return ok && g.State == raftstore.GenerationInvalid && strings.Contains(g.LeaderErrors[0], `test "allowed"`)
	})
	big := webPolicy("c")
	big["web/blob.bin"] = strings.Repeat("x", raftstore.MaxGenerationBytes)
	repo.commit("main", big)
	l.Trigger()
	eventually(t, "generation 3 invalid", func() bool {
		g, ok := store.State().Generation(3)
		return ok && g.State == raftstore.GenerationInvalid && strings.Contains(g.LeaderErrors[0], "byte limit")
	})
	if store.count(raftstore.TypeStageGeneration) != 0 {
		t.Error("an invalid tree was staged")
	}
	repo.commit("main", map[string]string{"web/blob.bin": "", "web/policy.toml": webPolicy("d")["web/policy.toml"]})
	l.Trigger()
	eventually(t, "generation 4 staged", func() bool { return store.State().Staged == 4 })
}

// TestLoopResumesAfterLeaderChange: a new leader finds what the old one
// left in the replicated state and neither records nor promotes anything
// twice.
func TestLoopResumesAfterLeaderChange(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", webPolicy("a"))
	first := newLoop(t, store, repo, fixedMembers{"n1", "n2"})
	stop := runLoop(t, first)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	c2 := repo.commit("main", brokenPolicy)
	first.Trigger()
	eventually(t, "generation 2 invalid", func() bool { _, ok := store.State().Generation(2); return ok })
	stop() // leadership lost with generation 1 staged, 2 invalid
	ready(t, store, 1, "n1", "n2")

	second := newLoop(t, store, repo, fixedMembers{"n1", "n2"})
	runLoop(t, second)
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	settle(t, second, repo)
	if st := store.State(); st.Highest != 2 || store.count(raftstore.TypeStageGeneration) != 1 ||
		store.count(raftstore.TypeMarkInvalid) != 1 || store.count(raftstore.TypeActivateGeneration) != 1 {
		t.Errorf("highest %d, %d stages, %d invalid, %d activations", st.Highest, store.count(raftstore.TypeStageGeneration),
			store.count(raftstore.TypeMarkInvalid), store.count(raftstore.TypeActivateGeneration))
	}
	// The new leader continues after the newest generation's commit.
	c3 := repo.commit("main", webPolicy("c"))
	second.Trigger()
	eventually(t, "generation 3 staged", func() bool { return store.State().Staged == 3 })
	if g := gen(t, store, 3); g.Commit != c3 || gen(t, store, 2).Commit != c2 {
		t.Errorf("generation 3 = %s", g.Commit)
	}
}

func TestLoopNewerCommitSupersedesStaged(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{"n1", "n2"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	ready(t, store, 1, "n1") // n2 never answers for 1
	repo.commit("main", webPolicy("b"))
	l.Trigger()
	eventually(t, "generation 2 staged", func() bool { return store.State().Staged == 2 })
	if g := gen(t, store, 1); g.State != raftstore.GenerationSuperseded {
		t.Errorf("generation 1 is %s", g.State)
	}
	// A node that cannot compile it makes it INVALID: never activated.
	if _, err := store.Propose(context.Background(), &raftstore.ReportFailed{Generation: 2, NodeID: "n2",
		Errors: []string{"boom"}}); err != nil {
		t.Fatal(err)
	}
	ready(t, store, 2, "n1")
	time.Sleep(50 * time.Millisecond)
	if st := store.State(); st.Active != 0 || st.Generations[2].State != raftstore.GenerationInvalid {
		t.Errorf("active %d, generation 2 %s", st.Active, st.Generations[2].State)
	}
}

// TestLoopPullError: a failing fetch is recorded once in the replicated
// state (not once per poll), changes of the message are recorded, and the
// first successful fetch deletes the record. The active generation is
// untouched throughout.
func TestLoopPullError(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	c1 := repo.commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	down := &gitsource.RemoteError{Op: "fetch", URL: "https://example.com/p.git", Reason: gitsource.ReasonNetwork, Msg: "connection refused"}
	repo.setFetchErr(down)
	for range 4 {
		settle(t, l, repo)
	}
	rec, ok := ReadSourceRecord(store.State())
	if !ok || rec.Error != down.Error() || rec.Reason != "network" || rec.Revision != "main@sha1:"+c1 || rec.URL == "" {
		t.Fatalf("record = %+v %v", rec, ok)
	}
	if n := store.count(raftstore.TypePutSourceStatus); n != 1 {
		t.Errorf("%d records written for one failure", n)
	}
	if s := l.Status(); s.Error != down.Error() || s.Commit != c1 {
		t.Errorf("status = %+v", s)
	}
	slow := &gitsource.RemoteError{Op: "fetch", Reason: gitsource.ReasonTimeout, Msg: "deadline exceeded"}
	repo.setFetchErr(slow)
	settle(t, l, repo)
	if rec2, _ := ReadSourceRecord(store.State()); rec2.Reason != "timeout" || !rec2.Since.Equal(rec.Since) {
		t.Errorf("changed failure = %+v", rec2)
	}
	repo.setFetchErr(nil)
	settle(t, l, repo)
	settle(t, l, repo)
	if _, ok := ReadSourceRecord(store.State()); ok || store.count(raftstore.TypeDeleteSourceStatus) != 1 {
		t.Errorf("record kept after recovery (%d deletes)", store.count(raftstore.TypeDeleteSourceStatus))
	}
	if st := store.State(); st.Active != 1 || st.Highest != 1 {
		t.Errorf("active %d highest %d", st.Active, st.Highest)
	}
	nl := startLoop(t, newFakeStore(), nil, fixedMembers{})
	eventually(t, "no source", func() bool { return strings.Contains(nl.Status().Error, "git.url") })
}

// TestLoopSlowFetchDoesNotHoldPromotion: promotion runs beside the passes.
func TestLoopSlowFetchDoesNotHoldPromotion(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{"n1"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	repo.mu.Lock()
	repo.block = make(chan struct{})
	repo.mu.Unlock()
	l.Trigger() // this pass hangs in Fetch
	time.Sleep(20 * time.Millisecond)
	ready(t, store, 1, "n1")
	eventually(t, "generation 1 active during a hung fetch", func() bool { return store.State().Active == 1 })
	close(repo.block)
}

func TestLoopBranchRecords(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", map[string]string{"web/policy.toml": webPolicy("a")["web/policy.toml"],
		"api/policy.toml": strings.ReplaceAll(webPolicy("x")["web/policy.toml"], "web", "api")})
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	head := repo.commit("feature/b", webPolicy("b"))
	repo.commit("broken", brokenPolicy)
	repo.commit("docs", map[string]string{"README": "words"})
	settle(t, l, repo)
	recs := ReadBranchRecords(store.State())
	b, broken, docs := recs["branches/feature/b"], recs["branches/broken"], recs["branches/docs"]
	if b.Branch != "feature/b" || b.HeadCommit != head || b.Revision != "feature/b@sha1:"+head ||
		fmt.Sprint(b.ChangedPolicies) != "[web]" || !b.Validation.Valid {
		t.Errorf("feature/b = %+v", b)
	}
	if broken.Validation.Valid || len(broken.Validation.Errors) == 0 || fmt.Sprint(broken.ChangedPolicies) != "[web]" {
		t.Errorf("broken = %+v", broken)
	}
	if len(docs.ChangedPolicies) != 0 || !docs.Validation.Valid || len(recs) != 3 {
		t.Errorf("docs = %+v, %d records", docs, len(recs))
	}
	puts := store.count(raftstore.TypePutBranch)
	settle(t, l, repo)
	if n := store.count(raftstore.TypePutBranch); n != puts {
		t.Errorf("%d writes when nothing moved", n-puts)
	}
	repo.deleteBranch("broken")
	repo.commit("main", webPolicy("b")) // main catches up with feature/b
	settle(t, l, repo)
	eventually(t, "records updated", func() bool {
		recs = ReadBranchRecords(store.State())
		_, gone := recs["branches/broken"]
		return !gone && len(recs["branches/feature/b"].ChangedPolicies) == 0
	})
}

func TestSameRefs(t *testing.T) {
	a := &gitsource.Refs{Main: gitsource.Revision{Ref: "main", Hash: "1"},
		Branches: map[string]gitsource.Revision{"main": {Ref: "main", Hash: "1"}}, Pulls: map[int]gitsource.Revision{}}
	b := &gitsource.Refs{Main: a.Main, Branches: map[string]gitsource.Revision{"main": a.Main, "x": {Ref: "x", Hash: "2"}},
		Pulls: map[int]gitsource.Revision{}}
	if !sameRefs(a, a) || sameRefs(a, b) {
		t.Error("sameRefs")
	}
}

func TestRemoteErrorReason(t *testing.T) {
	if reasonOf(errors.New("x")) != "" || reasonOf(fmt.Errorf("w: %w", &gitsource.RemoteError{Reason: gitsource.ReasonAuth})) != "auth" {
		t.Error("reasonOf")
	}
}

// TestLoopSkipsBranchPastBounds: a branch whose record raftstore refuses
// (a name over raftstore.MaxKeyBytes: anyone who can push can make one) is
// left out with a warning; the pass goes on and records the others.
func TestLoopSkipsBranchPastBounds(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	long := "a" + strings.Repeat("x", raftstore.MaxKeyBytes) // sorts first
	repo.commit(long, webPolicy("b"))
	repo.commit("fine", webPolicy("c"))
	settle(t, l, repo)
	recs := ReadBranchRecords(store.State())
	if _, ok := recs[BranchRecordPrefix+"fine"]; !ok || len(recs) != 1 {
		t.Fatalf("%d records, want only branches/fine", len(recs))
	}
}
