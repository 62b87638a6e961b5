package gitsource

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// Where the clone keeps what it fetched. Pull request heads get their own
// namespace rather than refs/remotes/origin/pull/*: a branch named "pull"
// or "pull/7" would otherwise collide with them.
const (
	branchSpec        = "+refs/heads/*:refs/remotes/origin/*"
	pullSpec          = "+refs/pull/*/head:refs/remotes/origin-pull/*"
	branchTracking    = "refs/remotes/origin/"
	pullTracking      = "refs/remotes/origin-pull/"
	remotePullPrefix  = "refs/pull/"
	remotePullSuffix  = "/head"
	revisionAlgorithm = "sha1"
)

// Revision is a commit as reached through a ref. It prints as flux does:
// "main@sha1:<hash>", "refs/pull/7/head@sha1:<hash>", or "sha1:<hash>"
// without a ref.
type Revision struct {
	// Ref is the branch name for branches, the full ref for pull heads.
	Ref string
	// Hash is the commit's full hex hash.
	Hash string
}

// String formats the revision for status, logs and the raft log.
func (r Revision) String() string {
	if r.Ref == "" {
		return revisionAlgorithm + ":" + r.Hash
	}
	return r.Ref + "@" + revisionAlgorithm + ":" + r.Hash
}

// Refs is what the remote had at the last Fetch.
type Refs struct {
	// Main is the live branch (Config.Branch).
	Main Revision
	// Branches holds every branch, the live one included, by name.
	Branches map[string]Revision
	// Pulls holds each refs/pull/N/head (GitHub pull requests) by N.
	Pulls map[int]Revision
}

// fetchSpecs are the refspecs of a fetch; pull heads only when the remote
// has some, since asking for a pattern nothing matches is wasted work.
func fetchSpecs(withPulls bool) []gitconfig.RefSpec {
	specs := []gitconfig.RefSpec{branchSpec}
	if withPulls {
		specs = append(specs, pullSpec)
	}
	return specs
}

// Fetch brings the clone up to date with the remote's branches and pull
// request heads, forced and pruned, and returns them. It lists the remote
// first and skips the fetch itself when nothing moved, so an idle poll
// costs one round trip. Failures are *RemoteError matching ErrFetch.
func (s *Source) Fetch(ctx context.Context) (*Refs, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	return s.fetchLocked(ctx)
}

func (s *Source) fetchLocked(ctx context.Context) (*Refs, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	want, withPulls, err := s.listRemote(ctx)
	if err != nil {
		return nil, s.cfg.remoteError(ctx, "fetch", err)
	}
	if _, ok := want[s.trackingRef()]; !ok {
		return nil, &RemoteError{Op: "fetch", URL: Redact(s.cfg.URL), Reason: ReasonNotFound,
			Msg: fmt.Sprintf("branch %q not found on the remote", s.cfg.Branch)}
	}
	s.mu.Lock()
	have, err := s.localTracking()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if sameRefs(want, have) {
		return s.readRefs(have, have)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fetchObjects(ctx, withPulls, len(have) > 0); err != nil {
		return nil, err
	}
	if err := s.prune(want); err != nil {
		return nil, err
	}
	now, err := s.localTracking()
	if err != nil {
		return nil, err
	}
	return s.readRefs(now, have)
}

// listRemote asks the remote for its refs and maps them to the names they
// get in the clone.
func (s *Source) listRemote(ctx context.Context) (map[plumbing.ReferenceName]plumbing.Hash, bool, error) {
	listed, err := s.remote.ListContext(ctx, &git.ListOptions{Auth: s.auth, PeelingOption: git.IgnorePeeled})
	if err != nil {
		return nil, false, err
	}
	want := map[plumbing.ReferenceName]plumbing.Hash{}
	withPulls := false
	for _, ref := range listed {
		if ref.Type() != plumbing.HashReference {
			continue
		}
		for _, spec := range fetchSpecs(true) {
			if spec.Match(ref.Name()) {
				want[spec.Dst(ref.Name())] = ref.Hash()
				withPulls = withPulls || spec == pullSpec
			}
		}
	}
	return want, withPulls, nil
}

// localTracking reads the clone's copies of the remote's refs. The caller
// holds mu.
func (s *Source) localTracking() (map[plumbing.ReferenceName]plumbing.Hash, error) {
	iter, err := s.repo.References()
	if err != nil {
		return nil, fmt.Errorf("gitsource: reading refs: %w", err)
	}
	have := map[plumbing.ReferenceName]plumbing.Hash{}
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		name := ref.Name().String()
		if ref.Type() == plumbing.HashReference &&
			(strings.HasPrefix(name, branchTracking) || strings.HasPrefix(name, pullTracking)) {
			have[ref.Name()] = ref.Hash()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gitsource: reading refs: %w", err)
	}
	return have, nil
}

func sameRefs(a, b map[plumbing.ReferenceName]plumbing.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for name, h := range a {
		if b[name] != h {
			return false
		}
	}
	return true
}

// fetchObjects runs the fetch proper. Pruning is done by prune instead of
// go-git: when the remote has no pull heads left, the pull refspec is not
// sent and go-git would never prune the old ones. A clone that has refs
// fetches through thinStorer, so the remote may send deltas on what it has.
func (s *Source) fetchObjects(ctx context.Context, withPulls, thin bool) error {
	remote := s.remote
	if thin {
		remote = git.NewRemote(&thinStorer{Storer: s.repo.Storer, objects: filepath.Join(s.cfg.Dir, "objects"), blobs: &s.blobs}, s.remote.Config())
	}
	err := remote.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   fetchSpecs(withPulls),
		Auth:       s.auth,
		Force:      true,
		Tags:       git.NoTags,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return s.cfg.remoteError(ctx, "fetch", err)
	}
	return nil
}

// prune deletes tracking refs the remote no longer has.
func (s *Source) prune(want map[plumbing.ReferenceName]plumbing.Hash) error {
	have, err := s.localTracking()
	if err != nil {
		return err
	}
	for name := range have {
		if _, ok := want[name]; ok {
			continue
		}
		if err := s.repo.Storer.RemoveReference(name); err != nil {
			return fmt.Errorf("gitsource: pruning %s: %w", name, err)
		}
	}
	return nil
}

// readRefs turns the tracking refs into Refs; before is what they were
// before the fetch, for the log.
func (s *Source) readRefs(have, before map[plumbing.ReferenceName]plumbing.Hash) (*Refs, error) {
	refs := &Refs{Branches: map[string]Revision{}, Pulls: map[int]Revision{}}
	for name, h := range have {
		n := name.String()
		if branch, ok := strings.CutPrefix(n, branchTracking); ok {
			refs.Branches[branch] = Revision{Ref: branch, Hash: h.String()}
		} else if num, ok := pullNumber(strings.TrimPrefix(n, pullTracking)); ok {
			refs.Pulls[num] = Revision{Ref: remotePullPrefix + strconv.Itoa(num) + remotePullSuffix, Hash: h.String()}
		}
	}
	main, ok := refs.Branches[s.cfg.Branch]
	if !ok {
		return nil, &RemoteError{Op: "fetch", URL: Redact(s.cfg.URL), Reason: ReasonNotFound,
			Msg: fmt.Sprintf("branch %q not found on the remote", s.cfg.Branch)}
	}
	refs.Main = main
	s.logFetch(refs, before)
	return refs, nil
}

// pullNumber parses the N of refs/pull/N/head; anything else under
// refs/pull is not a pull request head.
func pullNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// logFetch notes a moved live branch at info, anything else at debug.
func (s *Source) logFetch(refs *Refs, before map[plumbing.ReferenceName]plumbing.Hash) {
	if prev, ok := before[s.trackingRef()]; !ok || prev.String() != refs.Main.Hash {
		s.log.Info("live branch moved", "revision", refs.Main.String(), "from", prev.String(), "url", Redact(s.cfg.URL))
		return
	}
	s.log.Debug("fetched", "revision", refs.Main.String(), "branches", len(refs.Branches), "pulls", len(refs.Pulls))
}

// resolveRemoteHead is the live branch's commit in the clone.
func (s *Source) resolveRemoteHead() (plumbing.Hash, error) {
	ref, err := s.repo.Storer.Reference(s.trackingRef())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%w: %s has not been fetched", ErrUnknownRevision, s.cfg.Branch)
	}
	return ref.Hash(), nil
}
