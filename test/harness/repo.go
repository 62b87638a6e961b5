package harness

import (
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// RepoName is the repository's name on the git server.
const RepoName = "policies"

// RepoOptions shape a Repo.
type RepoOptions struct {
	// Token, when set, is required by the git server; nodes following the
	// repository get it through GitTokenEnv (see ClusterOptions.Repo).
	Token string
	// Files seed main instead of Tree(0) and a README.md.
	Files map[string]string
}

// Repo is the policy repository of a cluster: a real git server
// (internal/gittest, git http-backend on 127.0.0.1) holding RepoName, and
// a user's clone of it (Work) that pushes with the git CLI.
type Repo struct {
	T    testing.TB
	Git  *gittest.Server
	URL  string // the clone URL nodes follow, without credentials
	Work string // the user's clone, on main

	token string

	mu      sync.Mutex
	tree    int          // the last valid tree written
	written map[int]bool // every valid tree written
}

// NewRepo starts a git server whose RepoName holds tree 0 on main (or
// opts.Files) and clones it. The server stops in t.Cleanup.
func NewRepo(t testing.TB, opts RepoOptions) *Repo {
	t.Helper()
	files := opts.Files
	if files == nil {
		files = Tree(0)
		files["README.md"] = "policies written by the tests\n"
	}
	srv := gittest.NewServer(t, gittest.Options{Token: opts.Token})
	url := srv.InitRepo(RepoName, files)
	return &Repo{T: t, Git: srv, URL: url, Work: srv.Clone(url), token: opts.Token, written: map[int]bool{0: true}}
}

// Push commits files (content gittest.Deleted removes one) on main in
// the clone and pushes, as `git commit -am && git push` would; it returns
// the commit.
func (r *Repo) Push(files map[string]string, msg string) string {
	r.T.Helper()
	h := r.Git.Commit(r.Work, files, msg)
	r.Git.Push(r.Work, "main")
	return h
}

// Write makes tree k the head of main and returns the commit.
func (r *Repo) Write(k int) string {
	r.T.Helper()
	h := r.Push(map[string]string{Policy + "/policy.toml": WebPolicy(k)}, fmt.Sprintf("tree %d", k))
	r.mu.Lock()
	r.tree, r.written[k] = k, true
	r.mu.Unlock()
	return h
}

// WriteInvalid makes a tree that does not compile the head of main and
// returns the commit.
func (r *Repo) WriteInvalid() string {
	r.T.Helper()
	return r.Push(map[string]string{Policy + "/policy.toml": InvalidWebPolicy}, "invalid tree")
}

// Head is main's commit on the server.
func (r *Repo) Head() string { return r.Git.Head(RepoName, "main") }

// Tree is the last valid tree Write wrote (0 before any).
func (r *Repo) Tree() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tree
}

// Written reports every valid tree written so far, tree 0 included.
func (r *Repo) Written() map[int]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.written)
}
