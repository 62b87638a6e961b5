package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// gitDir is where the leader's bare clone lives inside node.data_dir.
// Every node keeps one (created empty at start), since any node may lead.
const gitDir = "git"

// seedRepository is the embedded default (git.init_from): when git.url is
// a local path that does not exist yet, it is created as a bare repository
// holding init_from's files as one commit on git.branch. An existing
// repository is never touched, so a restart keeps what users pushed.
// Several nodes sharing the path may start at once: the loser of the
// race finds the winner's repository.
func seedRepository(ctx context.Context, cfg *config.Config, now time.Time) (bool, error) {
	g := cfg.Git
	if !g.SeedsURL() {
		return false, nil
	}
	if _, err := os.Stat(g.URL); err == nil {
		return false, nil
	}
	if fi, err := os.Stat(g.InitFrom); err != nil {
		return false, fmt.Errorf("git.init_from: %w (it seeds git.url %s, which does not exist)", err, g.URL)
	} else if !fi.IsDir() {
		return false, fmt.Errorf("git.init_from: %s is not a directory", g.InitFrom)
	}
	created, err := gitsource.InitFromDir(ctx, g.URL, g.InitFrom, g.Branch, now)
	if err != nil {
		if _, openErr := git.PlainOpen(g.URL); openErr == nil {
			return false, nil // another node seeded it first
		}
		return false, fmt.Errorf("seeding git.url from git.init_from: %w", err)
	}
	return created, nil
}

// openSource opens the clone in {data_dir}/git that the leader loop
// fetches into. It does no network I/O.
func (m *Main) openSource(ctx context.Context, lopts policy.LoadOptions) (*reconcile.GitSource, error) {
	cfg := m.Config
	v, err := verifier(cfg.Git)
	if err != nil {
		return nil, err
	}
	src, err := reconcile.OpenGit(ctx, gitsource.Config{
		URL:         cfg.Git.URL,
		Branch:      cfg.Git.Branch,
		Path:        cfg.Git.Path,
		Dir:         filepath.Join(cfg.Node.DataDir, gitDir),
		Token:       cfg.Secret(cfg.Git.TokenEnv),
		Timeout:     cfg.Git.Timeout.Duration,
		Logger:      m.Logger.Named(logging.Git),
		LoadOptions: lopts,
		Verifier:    v,
		Repack:      m.Repack,
	})
	if err != nil {
		return nil, fmt.Errorf("open the git clone: %w", err)
	}
	return src, nil
}

// prepareSource seeds the embedded default repository when configured
// and says where the policies come from.
func (m *Main) prepareSource(ctx context.Context) error {
	cfg := m.Config
	log := m.Logger.Named(logging.Git)
	if cfg.Git.SeedsURL() && hasRaftState(cfg.Node.DataDir) {
		if _, err := os.Stat(cfg.Git.URL); errors.Is(err, fs.ErrNotExist) {
			log.Error("git.url is missing and this node already holds replicated state: not seeding it from "+
				"git.init_from (that would offer the seed as a new history); the active generation keeps serving "+
				"until the repository is restored", "url", cfg.Git.URL, "init_from", cfg.Git.InitFrom)
		}
		return nil
	}
	created, err := seedRepository(ctx, cfg, time.Now())
	if err != nil {
		return err
	}
	switch {
	case created:
		log.Info("created the policy repository from git.init_from", "url", cfg.Git.URL, "init_from", cfg.Git.InitFrom,
			"branch", cfg.Git.Branch)
	case cfg.Git.InitFrom != "" && !cfg.Git.SeedsURL():
		log.Debug("git.init_from ignored: git.url is not a local path", "url", gitsource.Redact(cfg.Git.URL))
	}
	if config.IsLocalPath(cfg.Git.URL) {
		if _, err := os.Stat(cfg.Git.URL); errors.Is(err, fs.ErrNotExist) {
			log.Warn("git.url does not exist; set git.init_from to create it, or push a repository there",
				"url", cfg.Git.URL)
		}
	}
	return nil
}

// verifier reads the trusted keys of [git] verify = "signed"; nil when
// commits are not verified.
func verifier(g config.Git) (*gitsource.Verifier, error) {
	if g.Verify != "signed" {
		return nil, nil
	}
	read := func(path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		return os.ReadFile(path)
	}
	keyring, err := read(g.OpenPGPKeyringFile)
	if err != nil {
		return nil, fmt.Errorf("git.openpgp_keyring_file: %w", err)
	}
	signers, err := read(g.SSHAllowedSignersFile)
	if err != nil {
		return nil, fmt.Errorf("git.ssh_allowed_signers_file: %w", err)
	}
	return gitsource.NewVerifier(keyring, signers)
}

// commitVerifier is the leader loop's signature check: nil (none) unless
// [git] verify = "signed".
func commitVerifier(src *reconcile.GitSource, g config.Git) func(string) (string, error) {
	if g.Verify != "signed" {
		return nil
	}
	return src.VerifyCommit
}
