package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/test/harness"
)

// webPolicy is version k of the shared test policy: /healthz is allowed by
// rule "health", and /v<k> by rule "v<k>", so an answer names its version.
func webPolicy(k int) string {
	return fmt.Sprintf(`default_action = "deny"

[[rules]]
name = "health"
priority = 1
action = "allow"
match = 'request.path == "/healthz"'

[[rules]]
name = "v%[1]d"
priority = 2
action = "allow"
match = 'request.path == "/v%[1]d"'

[[tests]]
name = "health is allowed"
request = { path = "/healthz" }
expect = "allow"
rule = "health"
`, k)
}

// brokenPolicy does not compile (a typo in a field name).
const brokenPolicy = `default_action = "deny"

[[rules]]
name = "typo"
priority = 1
action = "allow"
match = 'request.pth == "/"'
`

// failingPolicy compiles but fails its own test.
const failingPolicy = `default_action = "deny"

[[tests]]
name = "health is allowed"
request = { path = "/healthz" }
expect = "allow"
`

// policyRepo is a policy repository on disk (git.url is its local path)
// and a user's clone of it, pushed to with the git CLI.
type policyRepo struct {
	t    *testing.T
	srv  *gittest.Server
	url  string
	work string
}

// newPolicyRepo creates a repository whose main holds web at policyTOML.
func newPolicyRepo(t *testing.T, policyTOML string) *policyRepo {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{})
	srv.InitRepo("policies", map[string]string{"web/policy.toml": policyTOML})
	return &policyRepo{t: t, srv: srv, url: srv.RepoPath("policies"), work: srv.Clone(srv.RepoPath("policies"))}
}

// write commits web at policyTOML on main and pushes it; it returns the
// commit.
func (r *policyRepo) write(policyTOML string) string {
	r.t.Helper()
	h := r.srv.Commit(r.work, map[string]string{"web/policy.toml": policyTOML}, "edit web")
	r.srv.Push(r.work, "main")
	return h
}

// head is main's commit in the repository.
func (r *policyRepo) head() string { return r.srv.Head("policies", "main") }

// mustWrite replaces a file atomically (a hidden temporary file, then a
// rename).
func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitTimeout is generous: -race on two busy cores.
const waitTimeout = 30 * time.Second

// testLogger logs through t.Log at info level (debug and raft trace are noise).
func testLogger(t *testing.T) hclog.Logger {
	l := testlog.New(t)
	l.SetLevel(hclog.Info)
	return l
}

// nodeConfig is a valid configuration for node id with its own data
// directory, following the policy repository at url.
func nodeConfig(t *testing.T, id, url string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Node.ID = id
	cfg.Node.DataDir = filepath.Join(t.TempDir(), id)
	cfg.Node.HTTPAddr = "127.0.0.1:0"
	cfg.Node.RaftAddr = "127.0.0.1:0"
	cfg.Git.URL = url
	cfg.Git.InitFrom = ""
	cfg.Git.Poll = "@every 1h" // tests reconcile on request
	cfg.API.TokenEnv = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// httpClient has a deadline, so a hung node fails the test instead of it.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// apiClient is call's: it waits out an election (harness.Client.DoRetry),
// which a loaded machine sees now and then; the writes sent through call
// are idempotent or carry an etag or an experimentId.
var apiClient = harness.NewClient(10*time.Second, 0)

// call sends a request and decodes a JSON answer into out (if not nil).
func call(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	code, data, err := apiClient.DoRetry(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
	}
	return code
}

func tryCall(method, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // as every API client does
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// decision is the answer of :evaluate.
type decision struct {
	Decision   string `json:"decision"`
	Rule       string `json:"rule"`
	Etag       string `json:"etag"`
	Generation uint64 `json:"generation"`
}

// evaluate asks base for a decision of policy web on path, pinned to a
// generation when gen > 0.
func evaluate(base, path string, gen uint64) (decision, int, error) {
	url := base + "/v1/policies/web:evaluate"
	if gen > 0 {
		url = fmt.Sprintf("%s/v1/generations/%d/policies/web:evaluate", base, gen)
	}
	code, data, err := tryCall(http.MethodPost, url, fmt.Sprintf(`{"path":%q}`, path))
	var d decision
	if err == nil && code == 200 {
		err = json.Unmarshal(data, &d)
	}
	return d, code, err
}

// serves reports nil once the node at base answers from generation gen.
func serves(base string, gen uint64) error {
	d, code, err := evaluate(base, "/healthz", 0)
	if err != nil {
		return err
	}
	if code != 200 || d.Generation != gen {
		return fmt.Errorf("%s answers %d from generation %d, want %d", base, code, d.Generation, gen)
	}
	return nil
}

// testCluster is a set of in-process nodes following one repository.
type testCluster struct {
	t       *testing.T
	repo    *policyRepo
	nodes   map[string]*Main
	configs map[string]*config.Config
}

func newTestCluster(t *testing.T) *testCluster {
	return &testCluster{t: t, repo: newPolicyRepo(t, webPolicy(1)), nodes: map[string]*Main{},
		configs: map[string]*config.Config{}}
}

// write pushes a new version of the web policy to main.
func (c *testCluster) write(policyTOML string) string {
	c.t.Helper()
	return c.repo.write(policyTOML)
}

// start runs node id: the first one bootstraps, the others join the
// first one's HTTP address.
func (c *testCluster) start(id string, edit func(*config.Config)) *Main {
	c.t.Helper()
	cfg := nodeConfig(c.t, id, c.repo.url)
	if len(c.configs) == 0 {
		cfg.Node.Bootstrap = true
	} else {
		cfg.Node.Join = []string{c.nodes[c.first()].Addr()}
	}
	if edit != nil {
		edit(cfg)
	}
	c.configs[id] = cfg
	return c.run(id)
}

func (c *testCluster) first() string {
	ids := c.ids()
	return ids[0]
}

func (c *testCluster) ids() []string {
	var ids []string
	for id := range c.configs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// run starts node id with its configuration; its raft address stays the
// same across restarts (the same member), its HTTP port does not.
func (c *testCluster) run(id string) *Main {
	c.t.Helper()
	cfg := *c.configs[id] // a running node's configuration is not ours to change
	m := &Main{Config: &cfg, Logger: testLogger(c.t).Named(id)}
	if err := m.Run(context.Background()); err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	c.configs[id].Node.RaftAddr = m.Store().Addr()
	c.nodes[id] = m
	c.t.Cleanup(func() { _ = m.Close() })
	return m
}

func (c *testCluster) stop(id string) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Errorf("stop %s: %v", id, err)
	}
}

func (c *testCluster) base(id string) string { return "http://" + c.nodes[id].Addr() }

// leader waits for a leader among the running nodes and returns its id.
func (c *testCluster) leader(running ...string) string {
	c.t.Helper()
	var leader string
	eventually(c.t, waitTimeout, "a leader", func() error {
		for _, id := range running {
			if c.nodes[id].Store().IsLeader() {
				leader = id
				return nil
			}
		}
		return fmt.Errorf("no leader among %v", running)
	})
	return leader
}

// allServe waits until every listed node answers from generation gen.
func (c *testCluster) allServe(gen uint64, ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		eventually(c.t, waitTimeout, id+" serving generation "+fmt.Sprint(gen), func() error {
			return serves(c.base(id), gen)
		})
	}
}

// reconcile asks node id to reconcile (forwarded when it is a follower).
func (c *testCluster) reconcile(id string) {
	c.t.Helper()
	eventually(c.t, waitTimeout, "POST :reconcile accepted by "+id, func() error {
		code, data, err := tryCall(http.MethodPost, c.base(id)+"/v1/cluster:reconcile", "{}")
		if err == nil && code != http.StatusAccepted {
			err = fmt.Errorf("HTTP %d: %s", code, bytes.TrimSpace(data))
		}
		return err
	})
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// TestMain keeps the git processes of the tests (the CLI, and the ones
// go-git starts for local remotes) away from the developer's config.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}
