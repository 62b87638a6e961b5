package github_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

const (
	// apiToken is the nodes' [api] token: mutations and what nodes
	// forward to the leader (triggers, comment commands) carry it.
	apiToken = "reconciler-api-token-of-the-test"
	// waitLimit bounds every wait of these tests.
	waitLimit = harness.PromoteTimeout
)

func TestMain(m *testing.M) { harness.Main(m) }

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
// following the repository with [github] configured, all from
// test/harness.
type env struct {
	t       *testing.T
	git     *gittest.Server
	url     string
	work    string // a user's clone
	gh      *harness.GitHub
	emu     *githubemu.Server
	repo    *githubemu.Repo
	cluster *harness.Cluster
	nodes   []*harness.Node
	via     int // the node later webhooks go to
}

func newEnv(t *testing.T) *env { return newEnvWith(t, "") }

// newEnvWith is newEnv with extra TOML appended to every node's config,
// after its [preview] table: further tables such as
// [preview.thresholds."*"], but no key of [preview] itself.
func newEnvWith(t *testing.T, extra string) *env { return startEnv(t, extra, true) }

// startEnv is newEnvWith, with nodes built with the race detector or not:
// a test that measures the nodes' memory runs them without it, as
// operators do.
func startEnv(t *testing.T, extra string, race bool) *env {
	return startEnvFiles(t, map[string]string{"web/policy.toml": webPolicy("")}, extra, race)
}

// startEnvFiles is startEnv with files as main's first commit; they must
// include web/policy.toml, the policy decide evaluates.
func startEnvFiles(t *testing.T, files map[string]string, extra string, race bool) *env {
	if testing.Short() {
		t.Skip("end to end: starts real processes; skipped by -short")
	}
	src := harness.NewRepo(t, harness.RepoOptions{Files: files})
	gh := harness.NewGitHub(t, src)
	e := &env{t: t, git: src.Git, url: src.URL, work: src.Work, gh: gh, emu: gh.Emu, repo: gh.Repo, via: 2}
	// Registered after the servers' cleanups, the cluster's runs first:
	// the processes die before the servers they talk to close.
	e.cluster = harness.StartCluster(t, harness.ClusterOptions{
		Size:      3,
		Race:      race, // as when the nodes ran in process under -race
		Repo:      src,
		GitHub:    gh,
		APIToken:  apiToken,
		Extra:     "[preview]\nsummary = \"@every 1s\"\n" + extra,
		Configure: func(c *harness.Config) { c.Poll = "@every 1h" },
	})
	e.nodes = e.cluster.Nodes
	e.allActive(1)
	return e
}

// openPull pushes branch with web at policy and opens pull request #n
// from it; it returns the head commit.
func (e *env) openPull(branch, policy string) (int, string) {
	return e.openPullFiles(branch, map[string]string{"web/policy.toml": policy}, "change web")
}

// openPullFiles pushes branch with files committed (message msg) and
// opens pull request #n from it, the webhook going to a follower; it
// returns the head commit.
func (e *env) openPullFiles(branch string, files map[string]string, msg string) (int, string) {
	e.git.CreateBranch(e.work, branch)
	head := e.git.Commit(e.work, files, msg)
	e.git.Push(e.work, branch)
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: branch, HeadSHA: head, BaseRef: "main", Author: "alice"})
	e.git.SetRef("policies", fmt.Sprintf("refs/pull/%d/head", n), head)
	e.deliver(1, "pull_request", must(e.repo.PullRequestEvent("opened", n)))
	return n, head
}

// pushPull pushes a new version to the pull request's branch.
func (e *env) pushPull(n int, branch, policy string) string {
	return e.pushPullFiles(n, branch, map[string]string{"web/policy.toml": policy}, "change web again")
}

// pushPullFiles pushes files (message msg) to the pull request's branch.
func (e *env) pushPullFiles(n int, branch string, files map[string]string, msg string) string {
	e.git.Checkout(e.work, branch)
	head := e.git.Commit(e.work, files, msg)
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
	e.gh.Deliver(e.nodes[i], event, payload)
}

func (e *env) hook(i int) string { return harness.Hook(e.nodes[i]) }

// allActive waits until every node serves generation gen.
func (e *env) allActive(gen uint64) { e.t.Helper(); e.cluster.WaitActive(gen, waitLimit) }

// decide evaluates path on node i's web policy.
func (e *env) decide(i int, path string) string {
	e.t.Helper()
	return e.decideRequest(i, fmt.Sprintf(`{"path":%q}`, path))
}

// decideRequest evaluates a request (JSON) on node i's web policy, with no
// API token: decisions never need one.
func (e *env) decideRequest(i int, request string) string {
	e.t.Helper()
	d, err := anonymous.Evaluate(context.Background(), e.nodes[i], "web", request)
	if err != nil {
		e.t.Fatalf("evaluate on %s: %v", e.nodes[i].ID, err)
	}
	return d.Decision
}

// eventually waits up to waitLimit for cond (test/harness's WaitFor).
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	harness.WaitFor(t, waitLimit, what, cond)
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
