package gitsource

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrConflict means a source cannot be merged into the live branch without
// a human: both changed the same file differently since their merge base.
var ErrConflict = errors.New("gitsource: merge conflict")

// ConflictError names the files of a conflict (ErrConflict).
type ConflictError struct {
	// Source is the commit that was merged into Main.
	Source, Main string
	// Paths are relative to the policies root, sorted.
	Paths []string
}

// Error names at most 10 paths, each cut at 200 bytes: the paths come
// from whoever pushed the source, and the message travels into the
// replicated state, the status and pull request comments.
func (e *ConflictError) Error() string {
	const show, maxPath = 10, 200
	paths := make([]string, 0, show)
	for _, p := range e.Paths[:min(show, len(e.Paths))] {
		if len(p) > maxPath {
			p = p[:maxPath] + "…"
		}
		paths = append(paths, p)
	}
	more := ""
	if len(e.Paths) > show {
		more = fmt.Sprintf(" and %d more", len(e.Paths)-show)
	}
	return fmt.Sprintf("gitsource: merging %s into %s: both changed %s%s since their merge base; merge main into the source and resolve",
		short(e.Source), short(e.Main), strings.Join(paths, ", "), more)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

func short(h string) string { return h[:min(len(h), 12)] }

// Merge is the policies root of a source (a branch or pull request head)
// merged into the live branch, three-way from their merge base, as GitHub
// computes refs/pull/N/merge: a change main made since the base stays, a
// change the source made is applied, and the source never "undoes" what
// main did after it branched off.
type Merge struct {
	// Main and Source are the merged commits; Base their merge base ("":
	// unrelated histories, merged from nothing).
	Main, Source, Base string
	// Conflicts are the paths, relative to the policies root, both sides
	// changed differently; Files is nil when there are any.
	Conflicts []string
	// Files is the merged policies root, as Files reads a commit's.
	Files map[string][]byte
	// Merged reports that Source is already part of Main's history.
	Merged bool

	entries map[string]fileEntry
}

// fileEntry is a file of a flattened tree.
type fileEntry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// MergeBase is the best common ancestor of two commits, "" when their
// histories are unrelated. With several (criss-cross merges) the one with
// the lowest hash is taken, so the answer is stable.
func (s *Source) MergeBase(a, b string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mergeBaseLocked(a, b)
}

func (s *Source) mergeBaseLocked(a, b string) (string, error) {
	ca, err := s.commit(a)
	if err != nil {
		return "", err
	}
	cb, err := s.commit(b)
	if err != nil {
		return "", err
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return "", fmt.Errorf("gitsource: merge base of %s and %s: %w", short(a), short(b), err)
	}
	best := ""
	for _, c := range bases {
		if h := c.Hash.String(); best == "" || h < best {
			best = h
		}
	}
	return best, nil
}

// IsAncestor reports whether ancestor is in the history of descendant (a
// commit is its own ancestor), as `git merge-base --is-ancestor`.
func (s *Source) IsAncestor(ancestor, descendant string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.commit(ancestor)
	if err != nil {
		return false, err
	}
	d, err := s.commit(descendant)
	if err != nil {
		return false, err
	}
	ok, err := a.IsAncestor(d)
	if err != nil {
		return false, fmt.Errorf("gitsource: is %s an ancestor of %s: %w", short(ancestor), short(descendant), err)
	}
	return ok, nil
}

// MergePolicies merges the policies root of source into that of main,
// file by file (ThreeWay over blob hashes), from their merge base. Files
// outside the policies root are not looked at. A conflict is reported in
// Conflicts, never resolved.
func (s *Source) MergePolicies(main, source string) (*Merge, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.mergeLocked(main, source)
	if err != nil || len(m.Conflicts) > 0 {
		return m, err
	}
	r := &filesReader{src: s, rev: Revision{Ref: "merge", Hash: source}, out: map[string][]byte{}}
	for p, e := range m.entries {
		if e.mode == filemode.Dir || !visible(e.mode) {
			continue
		}
		if err := r.read(p, object.TreeEntry{Name: path.Base(p), Mode: e.mode, Hash: e.hash}); err != nil {
			return nil, err
		}
	}
	m.Files = r.out
	return m, nil
}

// mergeLocked computes the merged entries; the caller holds mu.
func (s *Source) mergeLocked(main, source string) (*Merge, error) {
	base, err := s.mergeBaseLocked(main, source)
	if err != nil {
		return nil, err
	}
	m := &Merge{Main: main, Source: source, Base: base, Merged: base == source}
	var trees [3]map[string]fileEntry
	for i, h := range []string{base, main, source} {
		if trees[i], err = s.flatten(h); err != nil {
			return nil, err
		}
	}
	m.entries, m.Conflicts = ThreeWay(trees[0], trees[1], trees[2])
	return m, nil
}

// flatten lists the files of a commit's policies root by slash path; an
// empty commit hash or a missing root has none. The listing is bounded
// like Files: an attacker's tree of a million empty files must not hold
// the leader's memory.
func (s *Source) flatten(hash string) (map[string]fileEntry, error) {
	out := map[string]fileEntry{}
	if hash == "" {
		return out, nil
	}
	c, err := s.commit(hash)
	if err != nil {
		return nil, err
	}
	root, err := s.rootTree(c)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return nil, err
	}
	size := 0
	var walk func(t *object.Tree, dir string) error
	walk = func(t *object.Tree, dir string) error {
		for _, e := range t.Entries {
			p := path.Join(dir, e.Name)
			if size += len(p) + 64; size > MaxFilesSize {
				return fmt.Errorf("%w: the policies root at %s lists too many files", ErrTooLarge, short(hash))
			}
			if e.Mode != filemode.Dir {
				out[p] = fileEntry{mode: e.Mode, hash: e.Hash}
				continue
			}
			sub, err := object.GetTree(s.repo.Storer, e.Hash)
			if err != nil {
				return fmt.Errorf("gitsource: reading %s at %s: %w", p, short(hash), err)
			}
			if err := walk(sub, p); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(root, "")
}

// mergedRoot writes the merged policies root as a tree; zero when empty.
// A path that is a file on one side and a directory on the other is a
// conflict.
func (m *Merge) mergedRoot(w objectWriter) (plumbing.Hash, error) {
	if len(m.entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	root := newTreeNode()
	for p, e := range m.entries {
		if err := root.add(p, e.mode, e.hash); err != nil {
			return plumbing.ZeroHash, &ConflictError{Source: m.Source, Main: m.Main, Paths: []string{p}}
		}
	}
	return root.write(w)
}
