// Package gitsource is the leader's view of the policy repository: a bare
// go-git clone kept in the data directory, fetched on every poll or webhook,
// read as an fs.FS at any commit, compared between commits by policy etag,
// and written to by revert and commit operations pushed fast-forward only.
//
// It never talks to the GitHub API. URLs and tokens are scrubbed before any
// log line or error (see Redact), and every network call runs under
// Config.Timeout. See DESIGN.md for the choices behind it.
package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/policy"
)

// DefaultTimeout bounds each network call when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// DefaultBranch is the live branch when Config.Branch is empty.
const DefaultBranch = "main"

// TokenUser is the basic-auth user name sent with Config.Token; GitHub
// accepts it for both installation and personal access tokens.
const TokenUser = "x-access-token"

// remoteName is the only remote of the local clone.
const remoteName = "origin"

// Config says which repository to follow and where to keep the clone.
type Config struct {
	// URL is the remote: a local path, file://, http(s):// or ssh:// (and
	// scp-like user@host:path). A relative local path is made absolute.
	URL string
	// Branch is the live branch; DefaultBranch when empty.
	Branch string
	// Path is the policies root inside the repository, slash-separated;
	// "." (the repository root) when empty.
	Path string
	// Dir is the directory of the local bare clone, inside the leader's
	// data directory. It is created when missing.
	Dir string
	// Token is sent as the basic-auth password over http(s). It never
	// appears in a log line or an error.
	Token string
	// Timeout bounds every network call; DefaultTimeout when zero.
	Timeout time.Duration
	// Logger receives debug and info lines; none when nil.
	Logger hclog.Logger
	// LoadOptions are used when ChangedPolicies loads policies, so that
	// comparisons agree with what the leader validates.
	LoadOptions policy.LoadOptions
	// Verifier, when set ([git] verify = "signed"), is what VerifyCommit
	// checks commit signatures with (verify.go).
	Verifier *Verifier
	// GC are the limits past which Housekeep repacks the clone; the
	// defaults (housekeeping.go) when zero. Tests lower them.
	GC GCLimits
	// Repack is where Housekeep writes its pack: a child process of the
	// node's binary, or this process when its Path is "".
	Repack RepackChild
}

// Source is a bare clone of the policy repository. Its methods, and the
// file systems FS returns, are safe for concurrent use; reads wait while a
// fetch that brings objects, or a push, holds the storage (at most
// Config.Timeout), or Housekeep swaps its new pack in (a few deletes: it
// writes the pack without the locks, repack.go).
type Source struct {
	cfg    Config
	repo   *git.Repository
	remote *git.Remote
	auth   transport.AuthMethod
	log    hclog.Logger

	// opMu serialises the operations that talk to the remote, so that two
	// fetches or a fetch and a push never interleave.
	opMu sync.Mutex
	// mu guards the object and ref storage and the trees read from it.
	// Readers take it too: go-git fills caches lazily on reads (the pack
	// index in ObjectStorage, Tree.FindEntry's path cache), so even two
	// readers must not overlap. A remote listing runs without it, so an
	// idle poll never blocks readers.
	mu sync.Mutex
	// own holds the commits this Source wrote (under mu): VerifyCommit
	// trusts them.
	own map[plumbing.Hash]bool
	// blobs keeps the contents of large blobs (blobcache.go), under mu.
	blobs blobCache
	// unpushed are the commits this Source wrote and could not push,
	// under mu: housekeeping keeps them a while (repack.go).
	unpushed unpushedCommits
	// hkMu lets one Housekeep run at a time: it writes its pack holding
	// neither opMu nor mu (repack.go).
	hkMu sync.Mutex
	// gc are Housekeep's limits (housekeeping.go); the defaults when zero.
	gc gcLimits
	// packing, when set (by tests), is called while Housekeep writes its
	// pack, holding no lock.
	packing func()
}

// Open opens the bare clone in cfg.Dir, creating it (an empty repository
// with remote "origin") when it does not exist. It does no network I/O:
// the first Fetch brings the objects.
func Open(ctx context.Context, cfg Config) (*Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	repo, err := openOrInit(cfg.Dir)
	if err != nil {
		return nil, err
	}
	remote, err := ensureRemote(repo, cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("gitsource: setting remote %s in %s: %s", Redact(cfg.URL), cfg.Dir, scrub(err.Error(), cfg.URL, cfg.Token))
	}
	s := &Source{cfg: cfg, repo: repo, remote: remote, auth: authFor(cfg.URL, cfg.Token), log: cfg.Logger}
	if cfg.GC != (GCLimits{}) {
		s.gc = gcLimits{looseObjects: cfg.GC.LooseObjects, looseBytes: cfg.GC.LooseBytes, packs: cfg.GC.Packs, window: gcWindow}
	}
	s.log.Debug("opened clone", "dir", cfg.Dir, "url", Redact(cfg.URL), "branch", cfg.Branch, "path", cfg.Path)
	return s, nil
}

// withDefaults fills in defaults and rejects what cannot work.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" || c.Dir == "" {
		return c, errors.New("gitsource: Config.URL and Config.Dir are required")
	}
	if c.Branch == "" {
		c.Branch = DefaultBranch
	}
	if err := plumbing.NewBranchReferenceName(c.Branch).Validate(); err != nil || strings.Contains(c.Branch, "*") {
		return c, fmt.Errorf("gitsource: invalid branch name %q", c.Branch)
	}
	root, err := cleanRoot(c.Path)
	if err != nil {
		return c, err
	}
	c.Path = root
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if isLocalPath(c.URL) {
		if c.URL, err = filepath.Abs(c.URL); err != nil {
			return c, fmt.Errorf("gitsource: %w", err)
		}
	}
	return c, nil
}

// cleanRoot turns Config.Path into a clean relative fs path.
func cleanRoot(p string) (string, error) {
	p = path.Clean(strings.Trim(filepath.ToSlash(p), "/"))
	if p == "" {
		p = "."
	}
	if !fs.ValidPath(p) {
		return "", fmt.Errorf("gitsource: git path %q must be relative and stay inside the repository", p)
	}
	return p, nil
}

// isLocalPath reports whether url names a directory rather than a remote,
// using go-git's own rule so that both agree.
func isLocalPath(url string) bool {
	ep, err := transport.NewEndpoint(url)
	return err == nil && ep.Protocol == "file" && !strings.HasPrefix(url, "file://")
}

// openOrInit opens the bare repository at dir or creates it.
func openOrInit(dir string) (*git.Repository, error) {
	repo, err := openBare(dir)
	if err == nil {
		return repo, nil
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("gitsource: opening clone %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("gitsource: creating clone dir: %w", err)
	}
	if _, err := git.PlainInit(dir, true); err != nil {
		return nil, fmt.Errorf("gitsource: creating clone %s: %w", dir, err)
	}
	repo, err = openBare(dir)
	if err != nil {
		return nil, fmt.Errorf("gitsource: opening clone %s: %w", dir, err)
	}
	return repo, nil
}

// largeObjectBytes is the size from which go-git reads an object only
// when its content is asked for. Without it a loose object (what a thin
// fetch stores) is read whole, into go-git's object cache, just to learn
// its size: a 16 MB list inflated at every read of a tree, and a 1 GB file
// pushed to any branch held in memory before the budgets could refuse it
// by its size.
const largeObjectBytes = 256 << 10

// openBare opens the bare clone in dir as git.PlainOpen does, with
// largeObjectBytes set and an object cache that keeps no large object
// (chainread.go).
func openBare(dir string) (*git.Repository, error) {
	st := filesystem.NewStorageWithOptions(osfs.New(dir), smallObjects{cache.NewObjectLRUDefault()},
		filesystem.Options{LargeObjectThreshold: largeObjectBytes})
	return git.Open(st, nil)
}

// ensureRemote points origin at url, replacing it when the configured URL
// changed; the next Fetch then prunes what the old remote left behind.
func ensureRemote(repo *git.Repository, url string) (*git.Remote, error) {
	r, err := repo.Remote(remoteName)
	if err == nil {
		if urls := r.Config().URLs; len(urls) == 1 && urls[0] == url {
			return r, nil
		}
		if err := repo.DeleteRemote(remoteName); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, git.ErrRemoteNotFound) {
		return nil, err
	}
	return repo.CreateRemote(&gitconfig.RemoteConfig{Name: remoteName, URLs: []string{url}, Fetch: fetchSpecs(false)})
}

// authFor chooses the credentials for url: the token as basic auth over
// http(s); nothing otherwise, so ssh falls back to go-git's defaults
// (ssh-agent, ~/.ssh/known_hosts) and local paths need none.
func authFor(url, token string) transport.AuthMethod {
	ep, err := transport.NewEndpoint(url)
	if err != nil || token == "" {
		return nil
	}
	if ep.Protocol == "http" || ep.Protocol == "https" {
		return &githttp.BasicAuth{Username: TokenUser, Password: token}
	}
	return nil
}

// withTimeout bounds one network call.
func (s *Source) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// branchRef is the live branch on the remote.
func (c *Config) branchRef() plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName(c.Branch)
}

// trackingRef is where the live branch is kept in the clone.
func (s *Source) trackingRef() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(remoteName, s.cfg.Branch)
}
