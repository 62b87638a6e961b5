package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// InitFromDir is the embedded default repository (config git.init_from):
// when bareRepoPath does not exist, it creates a bare repository there
// holding srcDir's files as one commit on branch, and reports created. When
// it exists, it does nothing, so a restart never overwrites what users
// pushed since. The repository is built beside its final path and renamed
// into place, so a crash never leaves a half-seeded one that would then be
// taken as existing. Directories named .git are skipped, and empty
// directories vanish as git cannot hold them. now is the commit time.
func InitFromDir(ctx context.Context, bareRepoPath, srcDir, branch string, now time.Time) (bool, error) {
	if branch == "" {
		branch = DefaultBranch
	}
	if _, err := os.Stat(bareRepoPath); err == nil {
		if _, err := git.PlainOpen(bareRepoPath); err != nil {
			return false, fmt.Errorf("gitsource: %s exists but is not a git repository: %w", bareRepoPath, err)
		}
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("gitsource: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(bareRepoPath), 0o755); err != nil {
		return false, fmt.Errorf("gitsource: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(bareRepoPath), "."+filepath.Base(bareRepoPath)+".init-")
	if err != nil {
		return false, fmt.Errorf("gitsource: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op after the rename
	if err := seed(ctx, tmp, srcDir, branch, now); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, bareRepoPath); err != nil {
		return false, fmt.Errorf("gitsource: %w", err)
	}
	return true, nil
}

// seed creates the bare repository in dir with one commit of srcDir.
func seed(ctx context.Context, dir, srcDir, branch string, now time.Time) error {
	ref := plumbing.NewBranchReferenceName(branch)
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("gitsource: invalid branch name %q", branch)
	}
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{Bare: true, InitOptions: git.InitOptions{DefaultBranch: ref}})
	if err != nil {
		return fmt.Errorf("gitsource: creating %s: %w", dir, err)
	}
	w := objectWriter{repo.Storer}
	root, err := dirTree(ctx, w, srcDir)
	if err != nil {
		return err
	}
	sig := signature("", "", now)
	msg := fmt.Sprintf("Seed policies from %s\n", filepath.Base(filepath.Clean(srcDir)))
	h, err := w.commit(&object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root})
	if err != nil {
		return fmt.Errorf("gitsource: writing the seed commit: %w", err)
	}
	return repo.Storer.SetReference(plumbing.NewHashReference(ref, h))
}

// dirTree stores the files under srcDir as a tree, keeping the executable
// bit and symbolic links as git does.
func dirTree(ctx context.Context, w objectWriter, srcDir string) (plumbing.Hash, error) {
	root := newTreeNode()
	err := filepath.WalkDir(srcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(srcDir, p)
		if err != nil {
			return err
		}
		mode, h, err := storeFile(w, p, d)
		if err != nil || mode == filemode.Empty {
			return err
		}
		return root.add(filepath.ToSlash(rel), mode, h)
	})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitsource: reading %s: %w", srcDir, err)
	}
	return root.write(w)
}

// storeFile stores one file as a blob; filemode.Empty means "not a file
// git keeps" (a socket, a device).
func storeFile(w objectWriter, p string, d fs.DirEntry) (filemode.FileMode, plumbing.Hash, error) {
	var data []byte
	var err error
	mode := filemode.Regular
	switch t := d.Type(); {
	case t&fs.ModeSymlink != 0:
		var target string
		target, err = os.Readlink(p)
		data, mode = []byte(filepath.ToSlash(target)), filemode.Symlink
	case t.IsRegular():
		data, err = os.ReadFile(p)
		if info, ierr := d.Info(); ierr == nil && info.Mode()&0o111 != 0 {
			mode = filemode.Executable
		}
	default:
		return filemode.Empty, plumbing.ZeroHash, nil
	}
	if err != nil {
		return 0, plumbing.ZeroHash, err
	}
	h, err := w.blob(data)
	return mode, h, err
}
