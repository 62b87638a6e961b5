package gitsource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// CheckFunc judges the policies root the live branch would hold after a
// commit, before anything is pushed: an error stops the commit, and is
// returned as it is (wrapped), so the caller sees its own reason.
type CheckFunc func(files map[string][]byte) error

// MergeRequest asks for a merge commit of Source into the live branch.
type MergeRequest struct {
	// Source is the commit to merge (a branch or pull request head).
	Source string
	// Message is the commit message.
	Message string
	// AuthorName and AuthorEmail sign the commit; defaults when empty.
	AuthorName, AuthorEmail string
	// Now is the commit time; the clock when zero.
	Now time.Time
	// Check, when set, must accept the merged policies root.
	Check CheckFunc
}

// pushAttempts bounds the retries of a checked commit whose push lost a
// race with another push to the live branch.
const pushAttempts = 3

// CommitMerge merges Source into the live branch's head as just fetched
// and pushes the merge commit (parents: the head, then Source), keeping
// Source's history: a branch or pull request is committed the way GitHub
// merges it. The policies root is merged three-way (MergePolicies); files
// outside it stay as main has them. A conflict is a *ConflictError, a
// Source already in main's history ErrNoChange; a Check failure and the
// errors of Revert are returned without anything pushed.
func (s *Source) CommitMerge(ctx context.Context, req MergeRequest) (string, error) {
	if req.Message == "" {
		return "", errors.New("gitsource: a commit needs a message")
	}
	src := plumbing.NewHash(req.Source)
	if !plumbing.IsHash(req.Source) {
		return "", fmt.Errorf("%w: %q is not a full commit hash", ErrUnknownRevision, req.Source)
	}
	build := func(head *object.Commit) (plumbing.Hash, []plumbing.Hash, error) {
		m, err := s.mergeLocked(head.Hash.String(), req.Source)
		switch {
		case err != nil:
			return plumbing.ZeroHash, nil, err
		case len(m.Conflicts) > 0:
			return plumbing.ZeroHash, nil, &ConflictError{Source: m.Source, Main: m.Main, Paths: m.Conflicts}
		case m.Merged:
			return plumbing.ZeroHash, nil, fmt.Errorf("%w: %s is already merged into %s", ErrNoChange, short(req.Source), s.cfg.Branch)
		}
		w := objectWriter{s.repo.Storer}
		sub, err := m.mergedRoot(w)
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		root, err := w.rootWith(head.TreeHash, s.cfg.Path, sub)
		return root, []plumbing.Hash{head.Hash, src}, err
	}
	return s.commitChecked(ctx, build, req.Message, signature(req.AuthorName, req.AuthorEmail, req.Now), req.Check)
}

// buildFunc makes the root tree and parents of a commit on top of the
// live branch's head; called with mu held.
type buildFunc func(head *object.Commit) (root plumbing.Hash, parents []plumbing.Hash, err error)

// commitChecked fetches, builds a commit on the live branch's head, lets
// check judge the policies root it would give, and pushes it with the head
// as the expected remote value. A push that lost a race with another
// writer starts over from a new fetch (pushAttempts in all), so check
// always judges exactly the tree that is pushed.
func (s *Source) commitChecked(ctx context.Context, build buildFunc, msg string, sig object.Signature, check CheckFunc) (string, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	for attempt := 1; ; attempt++ {
		if _, err := s.fetchLocked(ctx); err != nil {
			return "", err
		}
		h, head, err := s.writeCommit(build, msg, sig)
		if errors.Is(err, ErrNoChange) {
			return head.String(), err
		}
		if err != nil {
			return "", err
		}
		if check != nil {
			files, err := s.Files(h.String())
			if err == nil {
				err = check(files)
			}
			if err != nil {
				return "", fmt.Errorf("the commit was not pushed: %w", err)
			}
		}
		s.mu.Lock()
		if err = s.push(ctx, h, s.cfg.branchRef(), head); err == nil {
			s.trustOwn(h) // VerifyCommit: the leader wrote it and cannot sign it
		}
		s.mu.Unlock()
		var refused *PushRefusedError
		if errors.As(err, &refused) && refused.Stale && attempt < pushAttempts {
			s.log.Info("the live branch moved while committing; starting over", "attempt", attempt)
			continue
		}
		if err != nil {
			return "", err
		}
		s.log.Info("pushed", "revision", Revision{Ref: s.cfg.Branch, Hash: h.String()}.String(), "url", Redact(s.cfg.URL))
		return h.String(), nil
	}
}

// writeCommit writes (without pushing) the commit build describes on the
// live branch's head; ErrNoChange when the tree would stay the same.
func (s *Source) writeCommit(build buildFunc, msg string, sig object.Signature) (plumbing.Hash, plumbing.Hash, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head, err := s.resolveRemoteHead()
	if err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, err
	}
	parent, err := object.GetCommit(s.repo.Storer, head)
	if err != nil {
		return plumbing.ZeroHash, head, fmt.Errorf("gitsource: reading %s: %w", head, err)
	}
	root, parents, err := build(parent)
	if err != nil {
		return plumbing.ZeroHash, head, err
	}
	if root == parent.TreeHash && len(parents) == 1 {
		return plumbing.ZeroHash, head, ErrNoChange
	}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root, ParentHashes: parents}
	h, err := objectWriter{s.repo.Storer}.commit(c)
	if err != nil {
		return plumbing.ZeroHash, head, fmt.Errorf("gitsource: writing the commit: %w", err)
	}
	return h, head, nil
}
