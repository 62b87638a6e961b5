package node

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/gittest"
)

// singleNode is a one-node cluster (bootstrap) on the embedded default:
// git.url does not exist yet and is seeded from git.init_from, a
// directory holding web at policyTOML.
func singleNode(t *testing.T, policyTOML string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "seed", "web", "policy.toml"), policyTOML)
	cfg := nodeConfig(t, "node-t", filepath.Join(dir, "policies.git"))
	cfg.Git.InitFrom = filepath.Join(dir, "seed")
	cfg.Node.Bootstrap = true
	return cfg
}

// startNode runs a whole node in-process and stops it at the end of the test.
func startNode(t *testing.T, cfg *config.Config) *Main {
	t.Helper()
	m := &Main{Config: cfg, Logger: testLogger(t)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

func TestNodeServesDecisions(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	m := startNode(t, cfg)
	base := "http://" + m.Addr()
	eventually(t, waitTimeout, "generation 1", func() error { return serves(base, 1) })

	if code := call(t, http.MethodGet, base+"/readyz", "", nil); code != 200 {
		t.Fatalf("readyz = %d", code)
	}
	d, _, err := evaluate(base, "/v1", 0)
	if err != nil || d.Decision != "ALLOW" || d.Rule != "v1" || d.Generation != 1 {
		t.Errorf("decision = %+v %v", d, err)
	}
	if fi, err := os.Stat(filepath.Join(cfg.Node.DataDir, "raft")); err != nil || !fi.IsDir() {
		t.Errorf("raft data dir not created: %v", err)
	}
	g := m.Generations().Current()
	if g == nil || g.Generation != 1 || len(g.Commit) != 40 {
		t.Errorf("generation = %+v", g)
	}
	if m.Registry() == nil {
		t.Error("no registry")
	}
	var status struct {
		NodeID, Leader, RaftState string
		Nodes                     []map[string]any
	}
	call(t, http.MethodGet, base+"/v1/status", "", &status)
	if status.NodeID != "node-t" || status.Leader != "node-t" || status.RaftState != "Leader" || len(status.Nodes) != 1 {
		t.Errorf("status = %+v", status)
	}
	_, data, _ := tryCall(http.MethodGet, base+"/metrics", "")
	for _, series := range []string{`reconciler_raft_state{state="Leader"} 1`, "reconciler_promotions_total 1",
		"reconciler_active_generation 1", `reconciler_generation_compiles_total{result="ok"}`,
		"reconciler_raft_write_failures_total 0", "reconciler_data_dir_free_bytes "} {
		if !strings.Contains(string(data), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
}

func TestNodeStopsOnContextCancel(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	ctx, cancel := context.WithCancel(context.Background())
	m := &Main{Config: cfg, Logger: testLogger(t)}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	addr := m.Addr()
	cancel()
	if err := m.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still serving after cancel")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNodeInvalidFirstTree: the first tree does not compile. The node runs,
// records an INVALID generation, and refuses decisions with 503 until a
// valid tree arrives.
func TestNodeInvalidFirstTree(t *testing.T) {
	cfg := singleNode(t, brokenPolicy)
	m := startNode(t, cfg)
	base := "http://" + m.Addr()
	var gen struct {
		State  string   `json:"state"`
		Errors []string `json:"errors"`
	}
	eventually(t, waitTimeout, "generation 1 INVALID", func() error {
		code, _, err := tryCall(http.MethodGet, base+"/v1/generations/1", "")
		if err == nil && code != 200 {
			err = os.ErrNotExist
		}
		return err
	})
	call(t, http.MethodGet, base+"/v1/generations/1", "", &gen)
	if gen.State != "INVALID" || len(gen.Errors) == 0 || !strings.Contains(gen.Errors[0], "pth") {
		t.Errorf("generation 1 = %+v", gen)
	}
	if code := call(t, http.MethodGet, base+"/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Errorf("readyz = %d", code)
	}
	if _, code, _ := evaluate(base, "/healthz", 0); code != http.StatusServiceUnavailable {
		t.Errorf("decision = %d", code)
	}
	// A newcomer's fix: clone the embedded repository, edit, push.
	git := gittest.NewServer(t, gittest.Options{})
	work := git.Clone(cfg.Git.URL)
	git.Commit(work, map[string]string{"web/policy.toml": webPolicy(2)}, "fix the typo")
	git.Push(work, "main")
	if code := call(t, http.MethodPost, base+"/v1/cluster:reconcile", "", nil); code != http.StatusAccepted {
		t.Fatalf("reconcile = %d", code)
	}
	eventually(t, waitTimeout, "generation 2", func() error { return serves(base, 2) })
}

func TestNodeStartErrors(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	cfg.Git.InitFrom = filepath.Join(t.TempDir(), "missing")
	if err := (&Main{Config: cfg}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "init_from") {
		t.Errorf("missing init_from: %v", err)
	}
	cfg = singleNode(t, webPolicy(1))
	cfg.Node.DataDir = filepath.Join(t.TempDir(), "file")
	mustWrite(t, filepath.Join(cfg.Node.DataDir, gitDir), "not a directory")
	if err := (&Main{Config: cfg}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "git") {
		t.Errorf("clone dir is a file: %v", err)
	}
	if err := (&Main{}).Run(context.Background()); err == nil {
		t.Error("started without config")
	}
	// The HTTP address is taken.
	first := startNode(t, singleNode(t, webPolicy(1)))
	cfg = singleNode(t, webPolicy(1))
	cfg.Node.HTTPAddr = first.Addr()
	if err := (&Main{Config: cfg}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "http_addr") {
		t.Errorf("address in use: %v", err)
	}
	// The raft address is taken: the HTTP listener is released again.
	cfg = singleNode(t, webPolicy(1))
	cfg.Node.RaftAddr = first.Store().Addr()
	m := &Main{Config: cfg}
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "raft") {
		t.Errorf("raft address in use: %v", err)
	}
	if m.Addr() != "" {
		if _, err := http.Get("http://" + m.Addr() + "/healthz"); err == nil {
			t.Error("a failed Run left its HTTP listener serving")
		}
	}
}

func TestGenerationsKeepPrevious(t *testing.T) {
	var g generations
	if g.Current() != nil || g.Get(1) != nil || g.served() != 0 {
		t.Fatal("not empty")
	}
	s1, s2, s3 := &api.Snapshot{Generation: 1}, &api.Snapshot{Generation: 2}, &api.Snapshot{Generation: 3}
	g.publish(s1, nil)
	g.publish(s2, s1)
	if g.Current() != s2 || g.Get(1) != s1 || g.Get(2) != s2 || g.served() != 2 {
		t.Error("generation 1 and 2 not both kept")
	}
	g.publish(s3, s2)
	if g.Get(1) != nil || g.Get(2) != s2 || g.Get(3) != s3 {
		t.Error("only the active generation and the one before it are kept")
	}
}

// TestSeedRepository: the embedded default is created once, from
// init_from, as one commit on the branch; an existing repository (what
// users pushed since) is never touched; nodes racing to seed it all start.
func TestSeedRepository(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	created := make([]bool, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[i], errs[i] = seedRepository(context.Background(), cfg, time.Unix(1e9, 0))
		}()
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("seeding %d: %v", i, err)
		}
		if created[i] {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d callers created the repository", n)
	}
	git := gittest.NewServer(t, gittest.Options{})
	if log := git.Git(cfg.Git.URL, "log", "--format=%s", "main"); !strings.HasPrefix(log, "Seed policies from") || strings.Contains(log, "\n") {
		t.Errorf("log of main: %q", log)
	}
	if got := git.Git(cfg.Git.URL, "show", "main:web/policy.toml"); got != strings.TrimSpace(webPolicy(1)) {
		t.Errorf("seeded content: %q", got)
	}
	mustWrite(t, filepath.Join(cfg.Git.InitFrom, "web", "policy.toml"), webPolicy(2))
	if again, err := seedRepository(context.Background(), cfg, time.Now()); again || err != nil {
		t.Errorf("second seeding: %v %v", again, err)
	}
	// init_from does not apply to a remote.
	remote := *cfg
	remote.Git.URL, remote.Git.InitFrom = "https://example.com/p.git", filepath.Join(t.TempDir(), "missing")
	if c, err := seedRepository(context.Background(), &remote, time.Now()); c || err != nil {
		t.Errorf("remote url: %v %v", c, err)
	}
}
