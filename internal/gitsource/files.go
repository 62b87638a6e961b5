package gitsource

import (
	"fmt"
	"io/fs"
	"path"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyrollout/reconciler/internal/policy"
)

// MaxFilesSize bounds the policies root at one commit (file contents plus
// path names): Files is what a generation carries through the raft log,
// and every node keeps it in memory. It is the budget policy.ReadTree
// applies to a directory, so both readers refuse the same trees.
const MaxFilesSize = policy.MaxTreeBytes

// Files reads every regular file under the policies root at commit hash,
// keyed by slash-separated path relative to the root. It is what travels
// in the raft log, so followers need no git access. Over MaxFilesSize is
// an error matching ErrTooLarge; sizes are checked before contents are read.
func (s *Source) Files(hash string) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	commit, err := s.commit(hash)
	if err != nil {
		return nil, err
	}
	return s.filesOf(commit)
}

// filesOf is Files of a commit read already; called with mu held.
func (s *Source) filesOf(commit *object.Commit) (map[string][]byte, error) {
	root, err := s.rootTree(commit)
	if err != nil {
		return nil, err
	}
	r := &filesReader{src: s, rev: Revision{Hash: commit.Hash.String()}, out: map[string][]byte{}}
	if err := r.walk(root, ""); err != nil {
		return nil, err
	}
	return r.out, nil
}

// filesReader collects files while keeping count of their size.
type filesReader struct {
	src   *Source
	rev   Revision
	out   map[string][]byte
	count policy.TreeCounter
}

func (r *filesReader) walk(tree *object.Tree, dir string) error {
	for _, e := range tree.Entries {
		name := path.Join(dir, e.Name)
		switch {
		case e.Mode == filemode.Dir:
			sub, err := object.GetTree(r.src.repo.Storer, e.Hash)
			if err != nil {
				return fmt.Errorf("gitsource: reading %s at %s: %w", name, r.rev, err)
			}
			if err := r.walk(sub, name); err != nil {
				return err
			}
		case visible(e.Mode):
			if err := r.read(name, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *filesReader) read(name string, e object.TreeEntry) error {
	blob, err := object.GetBlob(r.src.repo.Storer, e.Hash)
	if err != nil {
		return fmt.Errorf("gitsource: reading %s at %s: %w", name, r.rev, err)
	}
	// List files (_lists/) count against the list budgets, not MaxFilesSize.
	if err := r.count.Add(name, blob.Size); err != nil {
		return fmt.Errorf("%w: the policies root %q at %s: %v; keep large data such as traffic samples outside git.path",
			ErrTooLarge, r.src.cfg.Path, r.rev, err)
	}
	data, err := r.src.blobData(blob)
	if err != nil {
		return fmt.Errorf("gitsource: reading %s at %s: %w", name, r.rev, err)
	}
	r.out[name] = data
	return nil
}

// FilesFS is the other direction of Files: the files of a generation, as
// received from the raft log, as an fs.FS for policy.Load. Directories are
// implied by the paths. The byte slices are shared, not copied.
func FilesFS(files map[string][]byte) fs.FS { return policy.TreeFS(files) }
