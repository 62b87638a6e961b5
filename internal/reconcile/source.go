package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyrollout/reconciler/internal/gitsource"
)

// Source is the leader's view of the policy repository. GitSource
// implements it over internal/gitsource; tests give the loop a fake.
type Source interface {
	// Fetch brings the leader's clone up to date with the remote and
	// returns its refs. Failures match gitsource.ErrFetch.
	Fetch(ctx context.Context) (*gitsource.Refs, error)
	// Commits lists the commits of the live branch after from up to and
	// including head, oldest first, following first parents. When from is
	// "", is not an ancestor of head, or is more than max commits back,
	// it returns head alone: the loop then takes the newest commit only.
	Commits(from, head string, max int) ([]string, error)
	// Files reads the policies root at a commit (gitsource.Files).
	Files(commit string) (map[string][]byte, error)
	// ChangedPolicies names the policies that differ between two commits.
	ChangedPolicies(from, to string) ([]string, error)
	// Revert writes a commit on the live branch restoring the policies
	// root to that of req.ToHash, and pushes it (gitsource.Revert).
	Revert(ctx context.Context, req gitsource.RevertRequest) (string, error)
}

// GitSource is the Source of a real repository: a gitsource.Source (the
// bare clone in the leader's data directory) plus a first-parent history
// walk over the same clone.
type GitSource struct {
	*gitsource.Source
	dir string
	// mu keeps the history walk, which opens the clone on its own, apart
	// from the writes of Revert. Fetches come from the loop goroutine that
	// also walks, so they never overlap a walk either.
	mu sync.Mutex
}

var _ Source = (*GitSource)(nil)

// OpenGit opens (creating when missing) the clone cfg describes. It does
// no network I/O; the loop's first Fetch does.
func OpenGit(ctx context.Context, cfg gitsource.Config) (*GitSource, error) {
	src, err := gitsource.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &GitSource{Source: src, dir: cfg.Dir}, nil
}

// Revert implements Source.
func (g *GitSource) Revert(ctx context.Context, req gitsource.RevertRequest) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Source.Revert(ctx, req)
}

// CommitPolicy replaces a policy directory on the live branch in one
// commit (PolicyCommitter), apart from history walks as
// Revert is.
func (g *GitSource) CommitPolicy(ctx context.Context, req gitsource.CommitPolicyRequest) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Source.CommitPolicy(ctx, req)
}

// Commits implements Source.
func (g *GitSource) Commits(from, head string, max int) ([]string, error) {
	if from == head {
		return nil, nil
	}
	if from == "" || max <= 1 {
		return []string{head}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	repo, err := git.PlainOpen(g.dir)
	if err != nil {
		return nil, fmt.Errorf("reconcile: opening the clone: %w", err)
	}
	return firstParents(repo, from, head, max)
}

// firstParents walks back from head along first parents until from.
func firstParents(repo *git.Repository, from, head string, max int) ([]string, error) {
	var back []string // newest first
	for hash := head; len(back) < max; {
		back = append(back, hash)
		c, err := object.GetCommit(repo.Storer, plumbing.NewHash(hash))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", gitsource.ErrUnknownRevision, hash, err)
		}
		if len(c.ParentHashes) == 0 {
			break // the root: from is not an ancestor (history was rewritten)
		}
		parent := c.ParentHashes[0].String()
		if parent == from {
			slices.Reverse(back)
			return back, nil
		}
		hash = parent
	}
	return []string{head}, nil
}

// errNoSource is what a loop without a source reports as its pull error.
var errNoSource = errors.New("no policy source is configured (git.url)")

// IsDirCommit reports whether a generation's commit names the content of a
// directory ("dir@sha256:…", from builds that read git.init_from
// directly) rather than a git commit: such a generation cannot be
// reverted to.
func IsDirCommit(commit string) bool {
	return len(commit) > 4 && commit[:4] == "dir@"
}
