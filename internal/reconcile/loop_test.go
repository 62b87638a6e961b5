package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// fakeStore applies proposals to a State with raftstore's own Applier,
// stamping times as Store.Propose does, and signals subscribers.
type fakeStore struct {
	mu       sync.Mutex
	state    *raftstore.State
	proposed []raftstore.CommandType
	subs     []chan struct{}
	now      time.Time
}

func newFakeStore() *fakeStore {
	return &fakeStore{state: raftstore.NewState(), now: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)}
}

func (f *fakeStore) State() *raftstore.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeStore) Subscribe() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	f.subs = append(f.subs, ch)
	return ch, func() {}
}

func (f *fakeStore) Propose(_ context.Context, p raftstore.Payload) (raftstore.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(time.Second)
	switch v := p.(type) {
	case *raftstore.StageGeneration:
		v.CreateTime = f.now
	case *raftstore.ActivateGeneration:
		v.Time = f.now
	case *raftstore.MarkInvalid:
		v.Time = f.now
	case *raftstore.ReportReady:
		v.Time = f.now
	case *raftstore.ReportFailed:
		v.Time = f.now
	}
	cmd, err := raftstore.NewCommand(p)
	if err != nil {
		return raftstore.Result{}, err
	}
	f.proposed = append(f.proposed, cmd.Type)
	next := f.state.Clone()
	err = (&raftstore.Applier{State: next}).Apply(cmd)
	next.LastIndex++
	f.state = next
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return raftstore.Result{Index: next.LastIndex}, err
}

// count returns how many commands of type t were proposed.
func (f *fakeStore) count(t raftstore.CommandType) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.proposed {
		if p == t {
			n++
		}
	}
	return n
}

// fixedMembers always requires the same nodes.
type fixedMembers []string

func (m fixedMembers) Required(*raftstore.State) []string { return m }

// sourceFunc adapts a function to TreeSource.
type sourceFunc func() (Tree, error)

func (f sourceFunc) Latest(context.Context) (Tree, error) { return f() }

// mutableSource serves whatever tree was set last.
type mutableSource struct {
	mu   sync.Mutex
	tree Tree
	err  error
}

func (s *mutableSource) set(files map[string]string) {
	t := Tree{Files: map[string][]byte{}}
	for p, c := range files {
		t.Files[p] = []byte(c)
	}
	t.Commit = DirCommit(t.Files)
	s.mu.Lock()
	s.tree, s.err = t, nil
	s.mu.Unlock()
}

func (s *mutableSource) Latest(context.Context) (Tree, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree, s.err
}

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

// startLoop runs a loop until the test ends.
func startLoop(t *testing.T, store *fakeStore, src TreeSource, members Members) *Loop {
	t.Helper()
	l, err := New(Config{Store: store, Members: members, Source: src, Poll: "@every 1h",
		LoadOptions: policy.LoadOptions{MergeDefault: policy.StrategyFail}, EngineOptions: engine.DefaultOptions(),
		Registry: prometheus.NewRegistry(), Logger: testlog.New(t), CheckInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
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

func TestLoopStagesThenActivatesWhenAllReady(t *testing.T) {
	store, src := newFakeStore(), &mutableSource{}
	src.set(webPolicy("a"))
	l := startLoop(t, store, src, fixedMembers{"n1", "n2"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	g := store.State().Generations[1]
	if g.Commit != src.tree.Commit || g.Etags["web"] == "" || string(g.Files["web/policy.toml"]) == "" {
		t.Errorf("staged = %+v", g)
	}
	ready(t, store, 1, "n1")
	time.Sleep(50 * time.Millisecond)
	if store.State().Active != 0 {
		t.Fatal("activated before every required node was ready")
	}
	ready(t, store, 1, "n2")
	eventually(t, "generation 1 active", func() bool { return store.State().Active == 1 })
	// The same tree again is no new generation.
	l.Trigger()
	l.Trigger()
	time.Sleep(50 * time.Millisecond)
	if st := store.State(); st.Highest != 1 || store.count(raftstore.TypeActivateGeneration) != 1 {
		t.Errorf("highest %d, %d activations", st.Highest, store.count(raftstore.TypeActivateGeneration))
	}
	if s := l.Status(); s.Commit != src.tree.Commit || s.Error != "" {
		t.Errorf("status = %+v", s)
	}
}

func TestLoopRecordsInvalidTrees(t *testing.T) {
	store, src := newFakeStore(), &mutableSource{}
	src.set(map[string]string{"web/policy.toml": "default_action = \"deny\"\n[[rules]]\nname = \"x\"\npriority = 1\naction = \"allow\"\nmatch = 'request.pth == \"/\"'\n"})
	l := startLoop(t, store, src, fixedMembers{"n1"})
	eventually(t, "generation 1 invalid", func() bool {
		g, ok := store.State().Generation(1)
		return ok && g.State == raftstore.GenerationInvalid
	})
	if g := store.State().Generations[1]; len(g.LeaderErrors) != 1 || !strings.HasPrefix(g.LeaderErrors[0], "web/policy.toml:") || !strings.Contains(g.LeaderErrors[0], "pth") {
		t.Errorf("errors = %q", g.LeaderErrors)
	}
	// A failing policy test.
	failing := webPolicy("b")
	failing["web/policy.toml"] = strings.Replace(failing["web/policy.toml"], `expect = "allow"`, `expect = "deny"`, 1)
	src.set(failing)
	l.Trigger()
	eventually(t, "generation 2 invalid", func() bool {
		g, ok := store.State().Generation(2)
		return ok && g.State == raftstore.GenerationInvalid && strings.Contains(g.LeaderErrors[0], `test "allowed"`)
	})
	// Too large for the log: refused before validation.
	big := webPolicy("c")
	big["web/blob.bin"] = strings.Repeat("x", raftstore.MaxGenerationBytes)
	src.set(big)
	l.Trigger()
	eventually(t, "generation 3 invalid", func() bool {
		g, ok := store.State().Generation(3)
		return ok && g.State == raftstore.GenerationInvalid && strings.Contains(g.LeaderErrors[0], "byte limit")
	})
	if store.count(raftstore.TypeStageGeneration) != 0 {
		t.Error("an invalid tree was staged")
	}
	// Generation numbers keep growing after invalid ones.
	src.set(webPolicy("d"))
	l.Trigger()
	eventually(t, "generation 4 staged", func() bool { return store.State().Staged == 4 })
}

// TestLoopResumesStagedGeneration: a new leader finds a generation staged
// by the previous one; it activates it once and never stages its commit
// again.
func TestLoopResumesStagedGeneration(t *testing.T) {
	store, src := newFakeStore(), &mutableSource{}
	src.set(webPolicy("a"))
	tree, _ := src.Latest(context.Background())
	v := Validate(tree.Files, policy.LoadOptions{}, engine.DefaultOptions())
	if _, err := store.Propose(context.Background(), &raftstore.StageGeneration{Generation: 5, Commit: tree.Commit,
		Files: tree.Files, Etags: v.Etags}); err != nil {
		t.Fatal(err)
	}
	ready(t, store, 5, "n1", "n2")
	startLoop(t, store, src, fixedMembers{"n1", "n2"})
	eventually(t, "generation 5 active", func() bool { return store.State().Active == 5 })
	time.Sleep(50 * time.Millisecond)
	if st := store.State(); st.Highest != 5 || store.count(raftstore.TypeStageGeneration) != 1 ||
		store.count(raftstore.TypeActivateGeneration) != 1 {
		t.Errorf("highest %d, %d stages, %d activations", st.Highest, store.count(raftstore.TypeStageGeneration),
			store.count(raftstore.TypeActivateGeneration))
	}
}

func TestLoopNewerCommitSupersedesStaged(t *testing.T) {
	store, src := newFakeStore(), &mutableSource{}
	src.set(webPolicy("a"))
	l := startLoop(t, store, src, fixedMembers{"n1", "n2"})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	ready(t, store, 1, "n1") // n2 never answers for 1
	src.set(webPolicy("b"))
	l.Trigger()
	eventually(t, "generation 2 staged", func() bool { return store.State().Staged == 2 })
	if g := store.State().Generations[1]; g.State != raftstore.GenerationSuperseded {
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

func TestLoopPullError(t *testing.T) {
	store := newFakeStore()
	l := startLoop(t, store, sourceFunc(func() (Tree, error) { return Tree{}, errors.New("disk on fire") }), fixedMembers{})
	eventually(t, "a pull error", func() bool { return l.Status().Error != "" })
	if s := l.Status(); !strings.Contains(s.Error, "disk on fire") || s.Time.IsZero() {
		t.Errorf("status = %+v", s)
	}
	if n := len(store.State().Generations); n != 0 {
		t.Errorf("%d generations after a pull error", n)
	}
	nl := startLoop(t, newFakeStore(), nil, fixedMembers{})
	eventually(t, "no source", func() bool { return strings.Contains(nl.Status().Error, "git.init_from") })
}

func TestKnown(t *testing.T) {
	st := raftstore.NewState()
	st.Generations[1] = raftstore.Generation{Number: 1, Commit: "A", State: raftstore.GenerationActive}
	st.Generations[2] = raftstore.Generation{Number: 2, Commit: "B", State: raftstore.GenerationStaged}
	st.Generations[3] = raftstore.Generation{Number: 3, Commit: "C", State: raftstore.GenerationInvalid}
	st.Active, st.Staged, st.Highest = 1, 2, 3
	for commit, want := range map[string]bool{"A": false, "B": true, "C": true, "D": false} {
		if got := known(st, commit) != ""; got != want {
			t.Errorf("known(%s) = %v", commit, got)
		}
	}
	st.Staged = 0
	if known(st, "A") == "" {
		t.Error("the active commit with nothing staged is known")
	}
}

func TestDirSource(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web/policy.toml", "a")
	write("_shared/x.toml", "b")
	src := DirSource{Root: dir}
	t1, err := src.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(t1.Files) != 2 || string(t1.Files["_shared/x.toml"]) != "b" || !strings.HasPrefix(t1.Commit, "dir@sha256:") ||
		len(t1.Commit) != len("dir@sha256:")+16 {
		t.Errorf("tree = %+v", t1)
	}
	write(".git/HEAD", "ref")
	write("web/.tmp-policy.toml", "half")
	if t2, _ := src.Latest(context.Background()); t2.Commit != t1.Commit || len(t2.Files) != 2 {
		t.Errorf("hidden entries changed the tree: %+v", t2.Files)
	}
	write("web/policy.toml", "c")
	if t3, _ := src.Latest(context.Background()); t3.Commit == t1.Commit {
		t.Error("a content change kept the commit")
	}
	// Moving content between files is a different tree.
	if DirCommit(map[string][]byte{"a": []byte("bc")}) == DirCommit(map[string][]byte{"ab": []byte("c")}) {
		t.Error("ambiguous digest")
	}
	if _, err := (DirSource{Root: filepath.Join(dir, "missing")}).Latest(context.Background()); err == nil {
		t.Error("a missing directory read fine")
	}
}
