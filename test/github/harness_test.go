package github_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

// Secrets of the test, in the variables the nodes' [github] names.
const (
	ghToken   = "ghp_testtoken0123456789abcdefghijklmnopqrstu"
	ghSecret  = "webhook-secret-of-the-test"
	tokenEnv  = "E2E_GITHUB_TOKEN"
	secretEnv = "E2E_GITHUB_SECRET"
	// The nodes' [api] token: mutations and what nodes forward to the
	// leader (triggers, comment commands) carry it.
	apiToken    = "reconciler-api-token-of-the-test"
	apiTokenEnv = "E2E_API_TOKEN"
	repoName    = "acme/policies"
	waitLimit   = 60 * time.Second
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	code := m.Run()
	harness.RemoveBinary()
	os.Exit(code)
}

// client talks to the nodes with the API token; a request that hangs
// fails the test. anonymous has no token.
var (
	client    = withToken(harness.NewClient(30*time.Second, 0), apiToken)
	anonymous = harness.NewClient(30*time.Second, 0)
)

func withToken(c *harness.Client, token string) *harness.Client {
	c.Token = token
	return c
}

// env is a real git server, the GitHub emulator whose merges push to that
// server, and a three-node cluster of `reconciler serve` processes
// (test/harness) following the repository with [github] configured.
type env struct {
	t       *testing.T
	git     *gittest.Server
	url     string
	work    string // a user's clone
	emu     *githubemu.Server
	repo    *githubemu.Repo
	api     string // the emulator behind gitHubFront
	cluster *harness.Cluster
	nodes   []*harness.Node
	via     int // the node later webhooks go to
}

func newEnv(t *testing.T) *env { return newEnvWith(t, "") }

// newEnvWith is newEnv with extra TOML appended to every node's config,
// after its [preview] table: further tables such as
// [preview.thresholds."*"], but no key of [preview] itself.
func newEnvWith(t *testing.T, extra string) *env {
	if testing.Short() {
		t.Skip("end to end: starts real processes; skipped by -short")
	}
	e := &env{t: t, git: gittest.NewServer(t, gittest.Options{}), via: 2}
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
	// Registered after the servers' cleanups, the cluster's runs first:
	// the processes die before the servers they talk to close.
	e.cluster = harness.StartCluster(t, harness.ClusterOptions{
		Size:     3,
		Race:     true, // as when the nodes ran in process under -race
		APIToken: apiToken,
		Env:      []string{tokenEnv + "=" + ghToken, secretEnv + "=" + ghSecret, apiTokenEnv + "=" + apiToken},
		Configure: func(c *harness.Config) {
			c.GitURL, c.Poll, c.APITokenEnv = e.url, "@every 1h", apiTokenEnv
			c.Extra = nodeTOML(e.api, extra)
		},
	})
	e.nodes = e.cluster.Nodes
	e.allActive(1)
	return e
}

// nodeTOML is the [github] and [preview] tables of every node, then
// extra.
func nodeTOML(api, extra string) string {
	return fmt.Sprintf(`[github]
repository = %q
api_url = %q
token_env = %q
webhook_secret_env = %q

[preview]
summary = "@every 1s"
`, repoName, api+"/api/v3/", tokenEnv, secretEnv) + extra
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

func (e *env) hook(i int) string { return e.nodes[i].Base() + "/v1/webhooks/github" }

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
	for _, n := range e.nodes {
		eventually(e.t, fmt.Sprintf("%s active generation %d", n.ID, gen), func() error {
			st, err := client.Status(n)
			if err != nil {
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
	return e.decideRequest(i, fmt.Sprintf(`{"path":%q}`, path))
}

// decideRequest evaluates a request (JSON) on node i's web policy, with no
// API token: decisions never need one.
func (e *env) decideRequest(i int, request string) string {
	e.t.Helper()
	code, body, err := anonymous.Do(http.MethodPost, e.nodes[i].Base()+"/v1/policies/web:evaluate", request)
	if err != nil {
		e.t.Fatal(err)
	}
	var d struct{ Decision string }
	if err := json.Unmarshal(body, &d); err != nil || code != 200 {
		e.t.Fatalf("evaluate: %d %v", code, err)
	}
	return d.Decision
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
