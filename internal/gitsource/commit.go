package gitsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Default author of the commits this package writes.
const (
	DefaultAuthorName  = "reconciler"
	DefaultAuthorEmail = "reconciler@localhost"
)

// policyNameRE is CONTRACT.md §1's policy name; internal/policy keeps its
// copy unexported.
var policyNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// RevertRequest asks for a commit on the live branch that restores the
// policies root to its tree at ToHash.
type RevertRequest struct {
	// ToHash is the commit whose policies root is restored.
	ToHash string
	// Message is the commit message, e.g. "Revert to generation 4 (<sha>)".
	Message string
	// AuthorName and AuthorEmail sign the commit; defaults when empty.
	AuthorName, AuthorEmail string
	// Now is the commit time; the clock when zero.
	Now time.Time
}

// CommitPolicyRequest asks for a commit on the live branch that replaces
// one policy directory.
type CommitPolicyRequest struct {
	// Policy is the policy's name: its directory under the policies root.
	Policy string
	// Files is the new content of that directory, by slash path relative
	// to it; empty deletes the policy.
	Files map[string][]byte
	// Edit, when set, computes Files from the policies root of the live
	// branch's head the commit is built on (each attempt's own, when the
	// push lost a race), so that an edit in place is made to the files
	// main holds then, not to an older version of them.
	Edit func(root map[string][]byte) (map[string][]byte, error)
	// Message is the commit message.
	Message string
	// AuthorName and AuthorEmail sign the commit; defaults when empty.
	AuthorName, AuthorEmail string
	// Now is the commit time; the clock when zero.
	Now time.Time
	// Check, when set, must accept the policies root the commit gives the
	// live branch; nothing is pushed otherwise.
	Check CheckFunc
}

// Revert writes a commit on top of the remote's live branch whose policies
// root is that of ToHash, everything else in the repository unchanged, and
// pushes it fast-forward only. It returns the new commit's hash. When the
// policies already match, it returns the current head and ErrNoChange. A
// refused push is a *PushRefusedError (ErrPushRefused); a failed fetch or
// push a *RemoteError.
func (s *Source) Revert(ctx context.Context, req RevertRequest) (string, error) {
	if req.Message == "" {
		return "", errors.New("gitsource: a revert needs a message")
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if _, err := s.fetchLocked(ctx); err != nil {
		return "", err
	}
	sub, err := s.rootAt(req.ToHash)
	if err != nil {
		return "", err
	}
	return s.commitOnBranch(ctx, s.cfg.Path, sub, req.Message, signature(req.AuthorName, req.AuthorEmail, req.Now))
}

// rootAt is the hash of the policies root's tree at a commit; zero when
// the commit has no policies root.
func (s *Source) rootAt(hash string) (plumbing.Hash, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(hash)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if s.cfg.Path == "." {
		return c.TreeHash, nil
	}
	tree, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitsource: tree of %s: %w", hash, err)
	}
	sub, err := tree.Tree(s.cfg.Path)
	switch {
	case errors.Is(err, object.ErrDirectoryNotFound):
		return plumbing.ZeroHash, nil // reverting to "no policies"
	case err != nil:
		return plumbing.ZeroHash, fmt.Errorf("gitsource: %s at %s: %w", s.cfg.Path, hash, err)
	}
	return sub.Hash, nil
}

// CommitPolicy writes a commit on top of the remote's live branch that
// replaces exactly the directory of one policy with Files, and pushes it
// fast-forward only; it is how an experiment is committed without a forge.
// Results and errors are as for Revert; with Check, the tree is judged
// before the push (commitChecked).
func (s *Source) CommitPolicy(ctx context.Context, req CommitPolicyRequest) (string, error) {
	if !policyNameRE.MatchString(req.Policy) {
		return "", fmt.Errorf("gitsource: invalid policy name %q: must match [a-z][a-z0-9-]{0,62}", req.Policy)
	}
	if req.Message == "" {
		return "", errors.New("gitsource: a commit needs a message")
	}
	dir := path.Join(s.cfg.Path, req.Policy)
	build := func(head *object.Commit) (plumbing.Hash, []plumbing.Hash, error) {
		if req.Edit != nil {
			root, err := s.editPolicy(head, req.Policy, req.Edit)
			return root, []plumbing.Hash{head.Hash}, err
		}
		w := objectWriter{s.repo.Storer}
		sub, err := w.filesTree(req.Files)
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		root, err := w.rootWith(head.TreeHash, dir, sub)
		if err != nil {
			return plumbing.ZeroHash, nil, fmt.Errorf("gitsource: building the tree: %w", err)
		}
		return root, []plumbing.Hash{head.Hash}, nil
	}
	return s.commitChecked(ctx, build, req.Message, signature(req.AuthorName, req.AuthorEmail, req.Now), req.Check)
}

// editPolicy is head's root tree with the files of policy's directory
// that edit changes written (or removed) one by one: the directory's
// other entries, file modes included, and everything else stay.
func (s *Source) editPolicy(head *object.Commit, policy string, edit func(map[string][]byte) (map[string][]byte, error)) (plumbing.Hash, error) {
	files, err := s.filesOf(head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	next, err := edit(files)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	w, root := objectWriter{s.repo.Storer}, head.TreeHash
	prefix := policy + "/"
	changed := map[string]bool{}
	for name, data := range next {
		if old, ok := files[prefix+name]; !ok || !bytes.Equal(old, data) {
			changed[name] = true
		}
	}
	for name := range files {
		if rel, ok := strings.CutPrefix(name, prefix); ok && next[rel] == nil {
			changed[rel] = true
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(changed)) {
		blob := plumbing.ZeroHash
		if data, ok := next[rel]; ok {
			if blob, err = w.blob(data); err != nil {
				return plumbing.ZeroHash, err
			}
		}
		if !fs.ValidPath(rel) {
			return plumbing.ZeroHash, fmt.Errorf("gitsource: invalid file path %q", rel)
		}
		if root, err = w.replaceFile(root, splitPath(path.Join(s.cfg.Path, policy, rel)), blob); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("gitsource: building the tree: %w", err)
		}
	}
	if root.IsZero() {
		return w.tree(nil)
	}
	return root, nil
}

// signature fills in the defaults of a commit's author.
func signature(name, email string, now time.Time) object.Signature {
	if name == "" {
		name = DefaultAuthorName
	}
	if email == "" {
		email = DefaultAuthorEmail
	}
	if now.IsZero() {
		now = time.Now()
	}
	return object.Signature{Name: name, Email: email, When: now}
}

// commitOnBranch commits on the live branch's head as last fetched (the
// caller has just fetched) with the directory dir set to the tree sub
// (removed when zero), and pushes.
func (s *Source) commitOnBranch(ctx context.Context, dir string, sub plumbing.Hash, msg string, sig object.Signature) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head, err := s.resolveRemoteHead()
	if err != nil {
		return "", err
	}
	parent, err := object.GetCommit(s.repo.Storer, head)
	if err != nil {
		return "", fmt.Errorf("gitsource: reading %s: %w", head, err)
	}
	w := objectWriter{s.repo.Storer}
	root, err := w.rootWith(parent.TreeHash, dir, sub)
	if err != nil {
		return "", fmt.Errorf("gitsource: building the tree: %w", err)
	}
	if root == parent.TreeHash {
		return head.String(), ErrNoChange
	}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root, ParentHashes: []plumbing.Hash{head}}
	h, err := w.commit(c)
	if err != nil {
		return "", fmt.Errorf("gitsource: writing the commit: %w", err)
	}
	if err := s.push(ctx, h, s.cfg.branchRef(), head); err != nil {
		s.unpushed.keep(h, time.Now()) // the caller may push it to a branch next
		return "", err
	}
	s.trustOwn(h)
	s.log.Info("pushed", "revision", Revision{Ref: s.cfg.Branch, Hash: h.String()}.String(), "url", Redact(s.cfg.URL))
	return h.String(), nil
}

// PushBranch pushes an existing commit (such as the Commit of a
// PushRefusedError) to a new or fast-forwarded branch, so that a pull
// request can propose what could not be pushed to the live branch.
func (s *Source) PushBranch(ctx context.Context, hash, branch string) error {
	ref := plumbing.NewBranchReferenceName(branch)
	if err := ref.Validate(); err != nil || strings.Contains(branch, "*") {
		return fmt.Errorf("gitsource: invalid branch name %q", branch)
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(hash)
	if err != nil {
		return err
	}
	return s.push(ctx, c.Hash, ref, plumbing.ZeroHash)
}

// push sends commit to the remote ref dst. When old is set the remote ref
// must still be there (a compare-and-swap, on top of go-git's
// fast-forward check). The caller holds mu for writing: go-git reads the
// objects to send and updates the tracking ref.
func (s *Source) push(ctx context.Context, commit plumbing.Hash, dst plumbing.ReferenceName, old plumbing.Hash) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	progress := &limitedBuffer{max: 4096}
	opts := &git.PushOptions{
		RemoteName: remoteName,
		RefSpecs:   []gitconfig.RefSpec{gitconfig.RefSpec(commit.String() + ":" + dst.String())},
		Auth:       s.auth,
		Progress:   progress,
	}
	if !old.IsZero() {
		opts.RequireRemoteRefs = []gitconfig.RefSpec{gitconfig.RefSpec(old.String() + ":" + dst.String())}
	}
	err := s.remote.PushContext(ctx, opts)
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return s.cfg.pushError(ctx, dst, commit, err, progress.String())
	}
	return nil
}

// pushError tells a refusal from a failure. go-git reports refusals only
// in text: its own fast-forward and RequireRemoteRefs checks, and the
// remote's report-status ("command error on <ref>: <status>").
func (c *Config) pushError(ctx context.Context, dst plumbing.ReferenceName, commit plumbing.Hash, err error, remoteSaid string) error {
	msg := err.Error()
	refused := &PushRefusedError{Ref: dst.String(), Commit: commit.String()}
	switch {
	case strings.Contains(msg, "non-fast-forward") || strings.Contains(msg, "required to be"):
		refused.Stale = true
	case strings.HasPrefix(msg, "command error on"):
	case reasonOf(err) == ReasonAuth:
		msg = "permission denied: " + msg
	default:
		return c.remoteError(ctx, "push", err)
	}
	if said := remoteLines(remoteSaid); said != "" {
		msg = said + "; " + msg
	}
	refused.Message = tidy(c.scrub(msg))
	return refused
}

// remoteLines joins the non-empty lines the remote printed.
func remoteLines(text string) string {
	var lines []string
	for _, l := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " / ")
}

// limitedBuffer keeps the first max bytes the remote prints; a chatty
// hook must not grow memory without bound.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
