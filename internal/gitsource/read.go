package gitsource

import (
	"errors"
	"fmt"
	"io/fs"
)

// FileReader reads the policies root at a commit (Source.Files).
type FileReader interface {
	Files(commit string) (map[string][]byte, error)
}

// TreeProblem is a commit whose policies root cannot be read as policies:
// missing at that commit, or too large. It is a problem of that commit (it
// makes an INVALID generation, an invalid branch), not a failure of the
// reader: the caller goes on with the next commit.
type TreeProblem struct {
	Msg string
	Err error
}

func (p *TreeProblem) Error() string { return p.Msg }

func (p *TreeProblem) Unwrap() error { return p.Err }

// ReadPolicies reads the policies root at rev through r. A root that is
// missing or too large is a *TreeProblem; other errors are the reader's.
func ReadPolicies(r FileReader, rev Revision) (map[string][]byte, error) {
	files, err := r.Files(rev.Hash)
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, &TreeProblem{Msg: err.Error(), Err: err}
	case errors.Is(err, fs.ErrNotExist):
		return nil, &TreeProblem{Msg: fmt.Sprintf("the policies root (git.path) does not exist at %s", rev), Err: err}
	case err != nil:
		return nil, err
	}
	return files, nil
}
