package github_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/node"
)

// Secrets of the test, in the variables the nodes' [github] names.
const (
	ghToken   = "ghp_testtoken0123456789abcdefghijklmnopqrstu"
	ghSecret  = "webhook-secret-of-the-test"
	repoName  = "acme/policies"
	waitLimit = 60 * time.Second
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// env is a real git server, the GitHub emulator whose merges push to that
// server, and a three-node cluster (in-process node.Main, as `reconciler
// serve` runs it) following the repository with [github] configured.
type env struct {
	t     *testing.T
	git   *gittest.Server
	url   string
	work  string // a user's clone
	emu   *githubemu.Server
	repo  *githubemu.Repo
	api   string // the emulator behind gitHubFront
	nodes []*node.Main
	via   int // the node later webhooks go to
	edit  func(*config.Config)
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv with every node's config changed by edit.
func newEnvWith(t *testing.T, edit func(*config.Config)) *env {
	t.Setenv("E2E_GITHUB_TOKEN", ghToken)
	t.Setenv("E2E_GITHUB_SECRET", ghSecret)
	e := &env{t: t, git: gittest.NewServer(t, gittest.Options{}), via: 2, edit: edit}
	e.url = e.git.InitRepo("policies", map[string]string{"web/policy.toml": webPolicy("")})
	e.work = e.git.Clone(e.url)
	e.emu = githubemu.New(githubemu.Options{Token: ghToken, WebhookSecret: ghSecret})
	t.Cleanup(e.emu.Close)
	e.repo = e.emu.AddRepo(repoName, "main")
	e.repo.SetRef("main", e.git.Head("policies", "main"))
	e.repo.SetPermission("alice", "write")
	e.repo.SetPermission("bob", "read")
	e.emu.OnMerge(e.merge)
	e.api = e.gitHubFront()
	for i := range 3 {
		e.start(fmt.Sprintf("n%d", i+1))
	}
	e.allActive(1)
	return e
}

// start runs one node; the first bootstraps, the others join it.
func (e *env) start(id string) {
	cfg := config.Default()
	cfg.Node.ID = id
	cfg.Node.DataDir = filepath.Join(e.t.TempDir(), id)
	cfg.Node.HTTPAddr, cfg.Node.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
	if len(e.nodes) == 0 {
		cfg.Node.Bootstrap = true
	} else {
		cfg.Node.Join = []string{e.nodes[0].Addr()}
	}
	cfg.Git.URL, cfg.Git.InitFrom, cfg.Git.Poll = e.url, "", "@every 1h"
	cfg.API.TokenEnv = ""
	cfg.GitHub = config.GitHub{Repository: repoName, APIURL: e.api + "/api/v3/", TokenEnv: "E2E_GITHUB_TOKEN",
		WebhookSecretEnv: "E2E_GITHUB_SECRET"}
	cfg.Preview.Summary = "@every 1s"
	if e.edit != nil {
		e.edit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		e.t.Fatal(err)
	}
	log := testlog.New(e.t)
	log.SetLevel(hclog.Info)
	m := &node.Main{Config: cfg, Logger: log.Named(id)}
	if err := m.Run(context.Background()); err != nil {
		e.t.Fatalf("start %s: %v", id, err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	e.nodes = append(e.nodes, m)
}

// gitHubFront serves the emulator's API and, before a pull request is
// created, copies the git server's branches into the emulator: on GitHub
// a branch pushed over git exists for the API at once.
func (e *env) gitHubFront() string {
	target, err := url.Parse(e.emu.URL())
	if err != nil {
		e.t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pulls") {
			out, err := e.git.TryGit("", "--git-dir", e.git.RepoPath("policies"), "for-each-ref",
				"--format=%(refname:short) %(objectname)", "refs/heads")
			if err == nil {
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					if name, sha, ok := strings.Cut(line, " "); ok {
						e.repo.SetRef(name, sha)
					}
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	e.t.Cleanup(srv.Close)
	return srv.URL
}

// merge is the emulator's OnMerge hook: it merges the head into main on
// the git server, as GitHub does, and returns the merge commit.
func (e *env) merge(req githubemu.MergeRequest) (string, error) {
	dir := e.git.Clone(e.url)
	steps := [][]string{{"fetch", "origin", req.HeadRef}, {"merge", "--no-ff", "-m", "Merge pull request #" + fmt.Sprint(req.Number), req.HeadSHA},
		{"push", "origin", "HEAD:main"}}
	for _, s := range steps {
		if out, err := e.git.TryGit(dir, s...); err != nil {
			return "", fmt.Errorf("git %v: %v: %s", s, err, out)
		}
	}
	return e.git.TryGit(dir, "rev-parse", "HEAD")
}

// openPull pushes branch with web at policy and opens pull request #n
// from it; it returns the head commit.
func (e *env) openPull(branch, policy string) (int, string) {
	e.git.CreateBranch(e.work, branch)
	head := e.git.Commit(e.work, map[string]string{"web/policy.toml": policy}, "change web")
	e.git.Push(e.work, branch)
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: branch, HeadSHA: head, BaseRef: "main", Author: "alice"})
	e.git.SetRef("policies", fmt.Sprintf("refs/pull/%d/head", n), head)
	e.deliver(1, "pull_request", must(e.repo.PullRequestEvent("opened", n)))
	return n, head
}

// pushPull pushes a new version to the pull request's branch.
func (e *env) pushPull(n int, branch, policy string) string {
	e.git.Checkout(e.work, branch)
	head := e.git.Commit(e.work, map[string]string{"web/policy.toml": policy}, "change web again")
	e.git.Push(e.work, branch)
	e.git.SetRef("policies", fmt.Sprintf("refs/pull/%d/head", n), head)
	e.repo.Push(branch, head)
	e.deliver(e.via, "pull_request", must(e.repo.PullRequestEvent("synchronize", n)))
	return head
}

// comment posts a comment by user on pull request n through the webhook.
func (e *env) comment(n int, user, body string) {
	payload, _, err := e.repo.CommentEvent(n, user, body)
	if err != nil {
		e.t.Fatal(err)
	}
	e.deliver(e.via, "issue_comment", payload)
}

// deliver sends a signed webhook to node i (a follower or the leader).
func (e *env) deliver(i int, event string, payload []byte) {
	e.t.Helper()
	res, err := e.emu.Deliver(e.hook(i), event, payload)
	if err != nil || res.Status != http.StatusAccepted {
		e.t.Fatalf("deliver %s: %v %+v", event, err, res)
	}
}

func (e *env) hook(i int) string { return "http://" + e.nodes[i].Addr() + "/v1/webhooks/github" }

// markedComments are the preview comments on pull request n.
func (e *env) markedComments(n int) []githubemu.Comment {
	var out []githubemu.Comment
	for _, c := range e.repo.Comments(n) {
		if strings.HasPrefix(c.Body, forge.Marker+"\n") {
			out = append(out, c)
		}
	}
	return out
}

// status is the newest status of context on sha.
func (e *env) status(sha, context string) (githubemu.Status, bool) {
	var last githubemu.Status
	found := false
	for _, s := range e.repo.Statuses(sha) {
		if s.Context == context {
			last, found = s, true
		}
	}
	return last, found
}

// waitStatus waits for context on sha to reach state.
func (e *env) waitStatus(sha, context, state string) githubemu.Status {
	e.t.Helper()
	var s githubemu.Status
	eventually(e.t, context+" "+state+" on "+sha[:8], func() error {
		var ok bool
		if s, ok = e.status(sha, context); !ok || s.State != state {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	return s
}

// allActive waits until every node serves generation gen.
func (e *env) allActive(gen uint64) {
	e.t.Helper()
	for _, m := range e.nodes {
		eventually(e.t, fmt.Sprintf("%s active generation %d", m.Config.Node.ID, gen), func() error {
			var st struct {
				ActiveGeneration uint64 `json:"activeGeneration"`
			}
			if err := getJSON("http://"+m.Addr()+"/v1/status", &st); err != nil {
				return err
			}
			if st.ActiveGeneration != gen {
				return fmt.Errorf("active %d", st.ActiveGeneration)
			}
			return nil
		})
	}
}

// decide evaluates path on node i's web policy.
func (e *env) decide(i int, path string) string {
	e.t.Helper()
	resp, err := http.Post("http://"+e.nodes[i].Addr()+"/v1/policies/web:evaluate", "application/json",
		strings.NewReader(fmt.Sprintf(`{"path":%q}`, path)))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct{ Decision string }
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("evaluate: %d %v", resp.StatusCode, err)
	}
	return d.Decision
}

func getJSON(url string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, v)
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// webPolicy allows everything but the paths it lists, each denied by a
// rule named after it.
func webPolicy(denied ...string) string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n")
	for i, p := range denied {
		if p == "" {
			continue
		}
		fmt.Fprintf(&b, "\n[[rules]]\nname = \"deny-%d\"\npriority = %d\naction = \"deny\"\nmatch = 'request.path == %q'\n",
			i, i+1, p)
	}
	b.WriteString("\n[[tests]]\nname = \"root\"\nrequest = { path = \"/\" }\nexpect = \"allow\"\n")
	return b.String()
}
