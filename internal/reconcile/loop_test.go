package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

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
	c1 := repo.Commit("main", webPolicy("a"))
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
	writes := store.Total()
	for range 3 {
		settle(t, l, repo)
	}
	if st := store.State(); st.Highest != 1 || store.Total() != writes {
		t.Errorf("highest %d, %d writes during idle polls", st.Highest, store.Total()-writes)
	}
	if s := l.SourceStatus(); s.Commit != c1 || s.Error != "" {
		t.Errorf("status = %+v", s)
	}
}

// TestLoopEveryCommitInOrder pushes several commits between two passes:
// each invalid one is recorded INVALID in order, the newest valid one is
// staged, older valid ones are superseded before staging, and commits
// that change no policy make no generation.
func TestLoopEveryCommitInOrder(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("v0"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })

	repo.Commit("main", webPolicy("v1"))                        // valid, superseded by c4
	c2 := repo.Commit("main", brokenPolicy)                     // invalid: generation 2
	c3 := repo.Commit("main", map[string]string{"README": "x"}) // main still broken: generation 3 INVALID
	c4 := repo.Commit("main", webPolicy("v4"))                  // valid: generation 4
	c5 := repo.Commit("main", map[string]string{"README": "y"}) // no policy change: no generation
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
	if st := store.State(); st.Highest != 4 || store.Count(raftstore.TypeStageGeneration) != 2 {
		t.Errorf("highest %d, %d stages", st.Highest, store.Count(raftstore.TypeStageGeneration))
	}
	if s := l.SourceStatus(); s.Commit != c5 {
		t.Errorf("status commit = %s, want the head %s", s.Commit, c5)
	}
	// The newest valid commit before an invalid head is staged, then the
	// head is recorded INVALID; the valid one still activates.
	c6 := repo.Commit("main", webPolicy("v6"))
	c7 := repo.Commit("main", brokenPolicy)
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
	repo.Commit("main", brokenPolicy)
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
	repo.Commit("main", failing)
	l.Trigger()
	eventually(t, "generation 2 invalid", func() bool {
		g, ok := store.State().Generation(2)
		return ok && g.State == raftstore.GenerationInvalid && strings.Contains(g.LeaderErrors[0], `test "allowed"`)
	})
	big := webPolicy("c")
	big["web/blob.bin"] = strings.Repeat("x", policy.MaxTreeBytes)
	repo.Commit("main", big)
	l.Trigger()
	eventually(t, "generation 3 invalid", func() bool {
		g, ok := store.State().Generation(3)
		return ok && g.State == raftstore.GenerationInvalid && strings.Contains(g.LeaderErrors[0], "policies root too large")
	})
	if store.Count(raftstore.TypeStageGeneration) != 0 {
		t.Error("an invalid tree was staged")
	}
	repo.Commit("main", map[string]string{"web/blob.bin": "", "web/policy.toml": webPolicy("d")["web/policy.toml"]})
	l.Trigger()
	eventually(t, "generation 4 staged", func() bool { return store.State().Staged == 4 })
}

// TestLoopResumesAfterLeaderChange: a new leader finds what the old one
// left in the replicated state and neither records nor promotes anything
// twice.
func TestLoopResumesAfterLeaderChange(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	first := newLoop(t, store, repo, fixedMembers{"n1", "n2"})
	stop := runLoop(t, first)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	c2 := repo.Commit("main", brokenPolicy)
	first.Trigger()
	eventually(t, "generation 2 invalid", func() bool { _, ok := store.State().Generation(2); return ok })
	stop() // leadership lost with generation 1 staged, 2 invalid
	ready(t, store, 1, "n1", "n2")

	second := newLoop(t, store, repo, fixedMembers{"n1", "n2"})
	runLoop(t, second)
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	settle(t, second, repo)
	if st := store.State(); st.Highest != 2 || store.Count(raftstore.TypeStageGeneration) != 1 ||
		store.Count(raftstore.TypeMarkInvalid) != 1 || store.Count(raftstore.TypeActivateGeneration) != 1 {
		t.Errorf("highest %d, %d stages, %d invalid, %d activations", st.Highest, store.Count(raftstore.TypeStageGeneration),
			store.Count(raftstore.TypeMarkInvalid), store.Count(raftstore.TypeActivateGeneration))
	}
	// The new leader continues after the newest generation's commit.
	c3 := repo.Commit("main", webPolicy("c"))
	second.Trigger()
	eventually(t, "generation 3 staged", func() bool { return store.State().Staged == 3 })
	if g := gen(t, store, 3); g.Commit != c3 || gen(t, store, 2).Commit != c2 {
		t.Errorf("generation 3 = %s", g.Commit)
	}
}

func TestLoopNewerCommitSupersedesStaged(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{"n1", "n2"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	ready(t, store, 1, "n1") // n2 never answers for 1
	repo.Commit("main", webPolicy("b"))
	l.Trigger()
	eventually(t, "generation 2 staged", func() bool { return store.State().Staged == 2 })
	if g := gen(t, store, 1); g.State != raftstore.GenerationSuperseded {
		t.Errorf("generation 1 is %s", g.State)
	}
	// A node that cannot compile it does not make it INVALID by itself
	// (Members decides: unloadable_test.go); it is not activated while
	// the node is still required.
	if _, err := store.Propose(context.Background(), &raftstore.ReportFailed{Generation: 2, NodeID: "n2",
		Errors: []string{"boom"}}); err != nil {
		t.Fatal(err)
	}
	ready(t, store, 2, "n1")
	time.Sleep(50 * time.Millisecond)
	if st := store.State(); st.Active != 0 || st.Generations[2].State != raftstore.GenerationStaged {
		t.Errorf("active %d, generation 2 %s", st.Active, st.Generations[2].State)
	}
}

// TestLoopPullError: a failing fetch is recorded once in the replicated
// state (not once per poll), changes of the message are recorded, and the
// first successful fetch deletes the record. The active generation is
// untouched throughout.
func TestLoopPullError(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	c1 := repo.Commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	down := &gitsource.RemoteError{Op: "fetch", URL: "https://example.com/p.git", Reason: gitsource.ReasonNetwork, Msg: "connection refused"}
	repo.SetFetchErr(down)
	for range 4 {
		settle(t, l, repo)
	}
	rec, ok := ReadSourceRecord(store.State())
	if !ok || rec.Error != down.Error() || rec.Reason != "network" || rec.Revision != "main@sha1:"+c1 || rec.URL == "" {
		t.Fatalf("record = %+v %v", rec, ok)
	}
	if n := store.Count(raftstore.TypePutSourceStatus); n != 1 {
		t.Errorf("%d records written for one failure", n)
	}
	if s := l.SourceStatus(); s.Error != down.Error() || s.Commit != c1 {
		t.Errorf("status = %+v", s)
	}
	slow := &gitsource.RemoteError{Op: "fetch", Reason: gitsource.ReasonTimeout, Msg: "deadline exceeded"}
	repo.SetFetchErr(slow)
	settle(t, l, repo)
	if rec2, _ := ReadSourceRecord(store.State()); rec2.Reason != "timeout" || !rec2.Since.Equal(rec.Since) {
		t.Errorf("changed failure = %+v", rec2)
	}
	repo.SetFetchErr(nil)
	settle(t, l, repo)
	settle(t, l, repo)
	if _, ok := ReadSourceRecord(store.State()); ok || store.Count(raftstore.TypeDeleteSourceStatus) != 1 {
		t.Errorf("record kept after recovery (%d deletes)", store.Count(raftstore.TypeDeleteSourceStatus))
	}
	if st := store.State(); st.Active != 1 || st.Highest != 1 {
		t.Errorf("active %d highest %d", st.Active, st.Highest)
	}
	nl := startLoop(t, newFakeStore(), nil, fixedMembers{})
	eventually(t, "no source", func() bool { return strings.Contains(nl.SourceStatus().Error, "git.url") })
}

// TestLoopSlowFetchDoesNotHoldPromotion: promotion runs beside the passes.
func TestLoopSlowFetchDoesNotHoldPromotion(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{"n1"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	repo.Mu.Lock()
	repo.Block = make(chan struct{})
	repo.Mu.Unlock()
	l.Trigger() // this pass hangs in Fetch
	time.Sleep(20 * time.Millisecond)
	ready(t, store, 1, "n1")
	eventually(t, "generation 1 active during a hung fetch", func() bool { return store.State().Active == 1 })
	close(repo.Block)
}

func TestLoopBranchRecords(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", map[string]string{"web/policy.toml": webPolicy("a")["web/policy.toml"],
		"api/policy.toml": strings.ReplaceAll(webPolicy("x")["web/policy.toml"], "web", "api")})
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	head := repo.Commit("feature/b", webPolicy("b"))
	repo.Commit("broken", brokenPolicy)
	repo.Commit("docs", map[string]string{"README": "words"})
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
	puts := store.Count(raftstore.TypePutBranch)
	settle(t, l, repo)
	if n := store.Count(raftstore.TypePutBranch); n != puts {
		t.Errorf("%d writes when nothing moved", n-puts)
	}
	repo.DeleteBranch("broken")
	repo.Commit("main", webPolicy("b")) // main catches up with feature/b
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
	repo.Commit("main", webPolicy("a"))
	l := startLoop(t, store, repo, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	long := "a" + strings.Repeat("x", raftstore.MaxKeyBytes) // sorts first
	repo.Commit(long, webPolicy("b"))
	repo.Commit("fine", webPolicy("c"))
	settle(t, l, repo)
	recs := ReadBranchRecords(store.State())
	if _, ok := recs[BranchRecordPrefix+"fine"]; !ok || len(recs) != 1 {
		t.Fatalf("%d records, want only branches/fine", len(recs))
	}
}

// TestTreeBudgetFitsAGeneration: the leader validates trees against
// policy.MaxTreeBytes (engine.ValidateTree), which must fit what the raft
// log takes for a generation, or a valid tree could fail to stage. A tree
// of policy files alone still fits one inline Stage, as before chunks.
func TestTreeBudgetFitsAGeneration(t *testing.T) {
	if policy.MaxTreeBytes > raftstore.MaxInlineBundleBytes || policy.MaxTreeBytes > raftstore.MaxGenerationBytes {
		t.Fatalf("policy.MaxTreeBytes %d over raftstore.MaxInlineBundleBytes %d or MaxGenerationBytes %d",
			policy.MaxTreeBytes, raftstore.MaxInlineBundleBytes, raftstore.MaxGenerationBytes)
	}
	// A tree at both budgets, its policies and its lists, travels in
	// chunks: it must fit a generation, or a valid tree could not stage.
	if policy.MaxTreeBytes+policy.MaxTreeListBytes > raftstore.MaxGenerationBytes {
		t.Fatalf("policy.MaxTreeBytes %d + MaxTreeListBytes %d over raftstore.MaxGenerationBytes %d",
			policy.MaxTreeBytes, policy.MaxTreeListBytes, raftstore.MaxGenerationBytes)
	}
}

// TestBranchExperimentsWithinTreeBudget (issue 16, attack 2): the
// experiments of one branch together compile no more rules than a
// generation may (policy.MaxTreeRules; 100 here, to keep the test quick);
// the policies past the budget are not previewed.
func TestBranchExperimentsWithinTreeBudget(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	l := newLoop(t, store, repo, fixedMembers{})
	l.cfg.Experiments = experiments.New(experiments.Config{Store: store, Leader: leaderOf(l), MaxSourceRules: 100,
		LoadOptions: l.cfg.LoadOptions, EngineOptions: l.cfg.EngineOptions, Logger: l.log})
	runLoop(t, l)
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	big := map[string]string{}
	for p := range 3 {
		var b strings.Builder
		b.WriteString("default_action = \"deny\"\n")
		for i := range 40 {
			fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"deny\"\nmatch = \"request.path == '/%d'\"\n", i, i, i)
		}
		big[fmt.Sprintf("p%d/policy.toml", p)] = b.String()
	}
	repo.Commit("big", big)
	settle(t, l, repo)
	exps, err := preview.FromState(store.State())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range exps {
		names = append(names, e.Name)
	}
	if len(names) != 2 || !slices.Contains(names, "policies/p0/experiments/branch-big") {
		t.Errorf("experiments %v, want those of p0 and p1 only (80 rules; p2 would make 120)", names)
	}
}

// TestLoopUsesItsValidator: the loop judges trees with Config.Validator
// (a node's child process): a verdict it gives, such as a child killed by
// its memory budget, marks the generation INVALID, and nothing is staged.
func TestLoopUsesItsValidator(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	var calls atomic.Int64
	l.cfg.Validator = func(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) Validation {
		calls.Add(1)
		if len(files) == 0 || lopts != l.cfg.LoadOptions || eopts != l.cfg.EngineOptions {
			t.Errorf("validator got %d files, %+v, %+v", len(files), lopts, eopts)
		}
		return Validation{Problems: []string{"validation exceeded its memory/time budget: killed"}}
	}
	runLoop(t, l)
	eventually(t, "generation 1 invalid", func() bool {
		g, ok := store.State().Generation(1)
		return ok && g.State == raftstore.GenerationInvalid
	})
	if g := gen(t, store, 1); len(g.LeaderErrors) != 1 || !strings.Contains(g.LeaderErrors[0], "memory/time budget") || calls.Load() == 0 {
		t.Errorf("errors = %q after %d calls", g.LeaderErrors, calls.Load())
	}
	if store.Count(raftstore.TypeStageGeneration) != 0 {
		t.Error("a tree the validator refused was staged")
	}
}
