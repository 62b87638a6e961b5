package harness

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
)

// Secrets of the GitHub emulator, in the variables a node's [github]
// table names (GitHub.TOML).
const (
	GitHubToken     = "ghp_testtoken0123456789abcdefghijklmnopqrstu"
	GitHubSecret    = "webhook-secret-of-the-test"
	GitHubTokenEnv  = "HARNESS_GITHUB_TOKEN"
	GitHubSecretEnv = "HARNESS_GITHUB_SECRET"
	// GitHubRepo is the emulated repository's full name.
	GitHubRepo = "acme/policies"
)

// GitHub is the GitHub emulator (internal/githubemu) in front of a Repo:
// its merges push to the git server, as GitHub's do, and a branch pushed
// over git exists for its API when a pull request is opened. Pass it as
// ClusterOptions.GitHub to point the nodes' [github] at it.
type GitHub struct {
	T    testing.TB
	Emu  *githubemu.Server
	Repo *githubemu.Repo // GitHubRepo on the emulator
	Git  *Repo           // the repository behind it
	URL  string          // the API base URL nodes use ([github] api_url)
}

// NewGitHub starts the emulator for repo, with main at repo's head, alice
// allowed to write and bob to read. It stops in t.Cleanup.
func NewGitHub(t testing.TB, repo *Repo) *GitHub {
	t.Helper()
	g := &GitHub{T: t, Git: repo,
		Emu: githubemu.New(githubemu.Options{Token: GitHubToken, WebhookSecret: GitHubSecret})}
	t.Cleanup(g.Emu.Close)
	g.Repo = g.Emu.AddRepo(GitHubRepo, "main")
	g.Repo.SetRef("main", repo.Head())
	g.Repo.SetPermission("alice", "write")
	g.Repo.SetPermission("bob", "read")
	g.Emu.OnMerge(g.merge)
	g.URL = g.front() + githubemu.DefaultPrefix + "/"
	return g
}

// TOML is the [github] table of a node using the emulator.
func (g *GitHub) TOML() string {
	return fmt.Sprintf("[github]\nrepository = %q\napi_url = %q\ntoken_env = %q\nwebhook_secret_env = %q\n",
		GitHubRepo, g.URL, GitHubTokenEnv, GitHubSecretEnv)
}

// Env is the environment entries holding the token and the secret.
func (g *GitHub) Env() []string {
	return []string{GitHubTokenEnv + "=" + GitHubToken, GitHubSecretEnv + "=" + GitHubSecret}
}

// front serves the emulator's API and, before a pull request is created,
// copies the git server's branches into the emulator: on GitHub a branch
// pushed over git exists for the API at once.
func (g *GitHub) front() string {
	target, err := url.Parse(g.Emu.URL())
	if err != nil {
		g.T.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pulls") {
			g.syncBranches()
		}
		proxy.ServeHTTP(w, r)
	}))
	g.T.Cleanup(srv.Close)
	return srv.URL
}

// syncBranches points the emulator's branches where the git server's are.
func (g *GitHub) syncBranches() {
	out, err := g.Git.Git.TryGit("", "--git-dir", g.Git.Git.RepoPath(RepoName), "for-each-ref",
		"--format=%(refname:short) %(objectname)", "refs/heads")
	if err != nil {
		return // the pull request is created without: the test sees it
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, sha, ok := strings.Cut(line, " "); ok {
			g.Repo.SetRef(name, sha)
		}
	}
}

// merge is the emulator's OnMerge hook: it merges the head into main on
// the git server, as GitHub does, and returns the merge commit.
func (g *GitHub) merge(req githubemu.MergeRequest) (string, error) {
	git := g.Git.Git
	dir := git.Clone(g.Git.URL)
	steps := [][]string{{"fetch", "origin", req.HeadRef},
		{"merge", "--no-ff", "-m", fmt.Sprintf("Merge pull request #%d", req.Number), req.HeadSHA},
		{"push", "origin", "HEAD:main"}}
	for _, s := range steps {
		if out, err := git.TryGit(dir, s...); err != nil {
			return "", fmt.Errorf("git %v: %v: %s", s, err, out)
		}
	}
	return git.TryGit(dir, "rev-parse", "HEAD")
}

// Deliver sends a signed webhook to n and fails the test unless n
// accepts it (202). While the cluster is between leaders it redelivers,
// as GitHub would, with the same delivery id: the node runs a delivery
// once.
func (g *GitHub) Deliver(n *Node, event string, payload []byte) {
	g.T.Helper()
	d := g.Emu.NewDelivery(event, payload)
	var res *githubemu.DeliveryResult
	_, _, err := untilElected(0, betweenLeaders, func() (int, []byte, error) {
		var err error
		if res, err = g.Emu.Redeliver(Hook(n), d); err != nil {
			return 0, nil, err
		}
		return res.Status, res.Body, nil
	})
	if err != nil || res.Status != http.StatusAccepted {
		g.T.Fatalf("deliver %s to %s: %v %+v", event, n.ID, err, res)
	}
}

// Hook is n's GitHub webhook URL.
func Hook(n *Node) string { return n.Base() + "/v1/webhooks/github" }

// MarkedComments are the reconciler's preview comments on pull request n.
func (g *GitHub) MarkedComments(n int) []githubemu.Comment {
	var out []githubemu.Comment
	for _, c := range g.Repo.Comments(n) {
		if strings.HasPrefix(c.Body, forge.Marker+"\n") {
			out = append(out, c)
		}
	}
	return out
}

// Status is the newest commit status of context on sha.
func (g *GitHub) Status(sha, context string) (githubemu.Status, bool) {
	var last githubemu.Status
	found := false
	for _, s := range g.Repo.Statuses(sha) {
		if s.Context == context {
			last, found = s, true
		}
	}
	return last, found
}

// WaitStatus waits up to PromoteTimeout until context on sha reaches
// state, and returns that status.
func (g *GitHub) WaitStatus(sha, context, state string) githubemu.Status {
	g.T.Helper()
	var s githubemu.Status
	WaitFor(g.T, PromoteTimeout, fmt.Sprintf("%s %s on %.8s", context, state, sha), func() error {
		var ok bool
		if s, ok = g.Status(sha, context); !ok || s.State != state {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	return s
}
