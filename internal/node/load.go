package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// loadLocal builds a generation from the policy directory git.init_from.
//
// This is the bootstrap loading path of the first build only: the git
// source and the raft-replicated generations replace it (a leader reads
// the tree at a commit, stages it through raft, and every node compiles and
// activates it). What they replace is this function and its call in Run;
// the API keeps reading generations through api.Generations unchanged.
func loadLocal(cfg *config.Config, generation uint64) (*api.Snapshot, error) {
	if cfg.Git.InitFrom == "" {
		return nil, fmt.Errorf("git.init_from is empty: this build serves policies from a local directory")
	}
	// init_from holds a repository tree; the policies root is git.path in it.
	dir := filepath.Join(cfg.Git.InitFrom, filepath.FromSlash(cfg.Git.Path))
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("policies from git.init_from: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("policies from git.init_from: %s is not a directory", dir)
	}
	repo, err := policy.Load(os.DirFS(dir), policy.LoadOptions{MergeDefault: cfg.Policy.MergeDefault})
	if err != nil {
		return nil, fmt.Errorf("load policies from %s: %w", dir, err)
	}
	bundle, err := engine.NewBundle(repo.Policies, engine.DefaultOptions())
	if err != nil {
		return nil, fmt.Errorf("compile policies from %s: %w", dir, err)
	}
	return &api.Snapshot{Generation: generation, Bundle: bundle}, nil
}
