package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// keepPrefix is where the refs of the commits Housekeep's caller keeps
// live, one per generation number: a branch force-pushed or deleted
// upstream leaves a recorded generation's commit reachable from nothing
// else, and the prune would delete it.
const keepPrefix = "refs/reconciler/generations/"

// unpushedKeep is how long housekeeping keeps a commit the Source wrote
// but could not push, which no ref reaches: its caller may push it
// elsewhere next, in a call of its own (a rollback refused on main goes
// to a branch and a pull request, reconcile's revertAsPull), and a run
// beside it may swap its pack in between. maxUnpushed bounds how many.
const (
	unpushedKeep = time.Hour
	maxUnpushed  = 64
)

// repackPlan is what Housekeep saw under the locks before writing its
// pack: the refs to pack from, the commits kept besides (unpushed) and
// the packs the new one replaces.
type repackPlan struct {
	skip   bool
	before ObjectStats
	refs   map[plumbing.ReferenceName]plumbing.Hash
	extra  []plumbing.Hash
	packs  []plumbing.Hash
}

// unpushedCommits are the commits a Source wrote and could not push, by
// when, which housekeeping keeps for unpushedKeep. Its Source's mu guards
// it.
type unpushedCommits struct{ at map[plumbing.Hash]time.Time }

// keep has housekeeping keep commit h for unpushedKeep from now, dropping
// the oldest past maxUnpushed.
func (u *unpushedCommits) keep(h plumbing.Hash, now time.Time) {
	if u.at == nil {
		u.at = map[plumbing.Hash]time.Time{}
	}
	u.heads(now) // forgets the expired ones
	if len(u.at) >= maxUnpushed {
		oldest := h
		for k, t := range u.at {
			if oldest == h || t.Before(u.at[oldest]) {
				oldest = k
			}
		}
		delete(u.at, oldest)
	}
	u.at[h] = now
}

// heads are the commits kept at now, forgetting those kept long enough.
func (u *unpushedCommits) heads(now time.Time) []plumbing.Hash {
	var heads []plumbing.Hash
	for h, t := range u.at {
		if now.Sub(t) >= unpushedKeep {
			delete(u.at, h)
			continue
		}
		heads = append(heads, h)
	}
	return heads
}

func (p repackPlan) result() Housekeeping {
	return Housekeeping{Before: p.before, After: p.before}
}

// planRepack sets the keep refs, and when the clone is past its limits
// takes the snapshot the pack is written from; it holds opMu and mu.
func planRepack(ctx context.Context, s *Source, keep map[uint64]string, lim gcLimits) (repackPlan, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var p repackPlan
	if err := ctx.Err(); err != nil {
		return p, err
	}
	if err := syncKeepRefs(s, keep); err != nil {
		return p, err
	}
	var err error
	if p.before, err = objectStats(filepath.Join(s.cfg.Dir, "objects")); err != nil {
		return p, err
	}
	b := p.before
	if p.skip = b.LooseObjects <= lim.looseObjects && b.LooseBytes <= lim.looseBytes && b.Packs <= lim.packs; p.skip {
		return p, nil
	}
	if p.refs, err = hashRefs(s.repo.Storer); err != nil {
		return p, err
	}
	p.extra = s.unpushed.heads(time.Now())
	if p.packs, err = s.repo.Storer.(storer.PackedObjectStorer).ObjectPacks(); err != nil {
		return p, fmt.Errorf("gitsource: listing the clone's packs: %w", err)
	}
	return p, nil
}

// syncKeepRefs makes the refs under keepPrefix name exactly the commits
// of keep that the clone holds (a commit it never fetched, as on a leader
// elected after the rewrite, cannot be kept and is left out). The caller
// holds mu.
func syncKeepRefs(s *Source, keep map[uint64]string) error {
	refs, err := hashRefs(s.repo.Storer)
	if err != nil {
		return err
	}
	want := map[plumbing.ReferenceName]plumbing.Hash{}
	for n, commit := range keep {
		h := plumbing.NewHash(commit)
		if _, err := s.repo.Storer.EncodedObject(plumbing.CommitObject, h); err != nil {
			s.log.Debug("a recorded generation's commit is not in the clone; not kept", "generation", n, "commit", commit)
			continue
		}
		want[plumbing.ReferenceName(keepPrefix+strconv.FormatUint(n, 10))] = h
	}
	for name, h := range refs {
		if strings.HasPrefix(name.String(), keepPrefix) && want[name] != h {
			if err := s.repo.Storer.RemoveReference(name); err != nil {
				return fmt.Errorf("gitsource: removing %s: %w", name, err)
			}
		}
	}
	for name, h := range want {
		if refs[name] != h {
			if err := s.repo.Storer.SetReference(plumbing.NewHashReference(name, h)); err != nil {
				return fmt.Errorf("gitsource: setting %s: %w", name, err)
			}
		}
	}
	return nil
}

// hashRefs lists the refs that name an object.
func hashRefs(st storer.ReferenceStorer) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	iter, err := st.IterReferences()
	if err != nil {
		return nil, fmt.Errorf("gitsource: reading refs: %w", err)
	}
	refs := map[plumbing.ReferenceName]plumbing.Hash{}
	err = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			refs[r.Name()] = r.Hash()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gitsource: reading refs: %w", err)
	}
	return refs, nil
}

// newPack is the pack writePack wrote and the objects it holds.
type newPack struct {
	hash    plumbing.Hash
	objects map[plumbing.Hash]struct{}
}

// writePack writes everything the plan's refs reach into one new pack in
// the clone at dir, through a storage of its own: the Source's storage is
// not safe for concurrent use, and objects files are never rewritten, so
// reading them while a fetch adds others is. The new pack is not seen by
// the Source's storage before swapPack reindexes it.
func writePack(ctx context.Context, dir string, plan repackPlan, window uint) (newPack, error) {
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(),
		filesystem.Options{LargeObjectThreshold: largeObjectBytes})
	heads := slices.AppendSeq(slices.Clone(plan.extra), maps.Values(plan.refs))
	objs, err := revlist.Objects(st, heads, nil)
	if err != nil {
		return newPack{}, fmt.Errorf("gitsource: listing what the refs reach: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return newPack{}, err
	}
	w, err := st.PackfileWriter()
	if err != nil {
		return newPack{}, fmt.Errorf("gitsource: writing a pack: %w", err)
	}
	h, err := packfile.NewEncoder(ctxWriter{ctx, w}, st, false).Encode(objs, window)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return newPack{}, fmt.Errorf("gitsource: repacking the clone: %w", err)
	}
	p := newPack{hash: h, objects: make(map[plumbing.Hash]struct{}, len(objs))}
	for _, o := range objs {
		p.objects[o] = struct{}{}
	}
	return p, nil
}

// ctxWriter fails its writes once ctx is done: go-git's encoder takes no
// context, and a term that ends need not wait for the rest of a pack.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// swapPack makes the new pack the clone's: it deletes the packs the plan
// saw (when everything the refs reach now is in the new pack or loose)
// and every loose object that is packed or that no ref reaches. It holds
// opMu and mu, so no fetch or push writes meanwhile; no grace period, as
// git keeps for writers racing it, is needed.
func swapPack(s *Source, plan repackPlan, pack newPack) (ObjectStats, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repo.Storer
	reindex(st) // go-git would not find the new pack, nor forget the deleted ones
	defer reindex(st)
	reach, err := reachable(st, plan, pack, s.unpushed.heads(time.Now()))
	if err != nil {
		return ObjectStats{}, err
	}
	los := st.(storer.LooseObjectStorer)
	covered := true
	var stale []plumbing.Hash
	err = los.ForEachObjectHash(func(h plumbing.Hash) error {
		_, packed := pack.objects[h]
		_, needed := reach[h]
		if packed || !needed {
			stale = append(stale, h)
		}
		return nil
	})
	if err != nil {
		return ObjectStats{}, fmt.Errorf("gitsource: listing loose objects: %w", err)
	}
	for h := range reach {
		if _, packed := pack.objects[h]; !packed && !isLoose(los, h) {
			covered = false // reached again since the snapshot, only in an old pack
			break
		}
	}
	if err := deleteObjects(st, stale, plan.packs, pack.hash, covered); err != nil {
		return ObjectStats{}, err
	}
	objects := filepath.Join(s.cfg.Dir, "objects")
	if err := removeTemp(objects); err != nil {
		return ObjectStats{}, err
	}
	return objectStats(objects)
}

// reachable is what the refs and the unpushed commits kept (extra) reach
// now: the new pack's objects when the refs are those of the snapshot and
// the pack holds every commit kept, else a walk of the current ones.
func reachable(st storer.Storer, plan repackPlan, pack newPack, extra []plumbing.Hash) (map[plumbing.Hash]struct{}, error) {
	refs, err := hashRefs(st)
	if err != nil {
		return nil, err
	}
	packed := func(h plumbing.Hash) bool { _, ok := pack.objects[h]; return ok }
	if maps.Equal(refs, plan.refs) && !slices.ContainsFunc(extra, func(h plumbing.Hash) bool { return !packed(h) }) {
		return pack.objects, nil
	}
	heads := slices.AppendSeq(extra, maps.Values(refs))
	objs, err := revlist.Objects(st, heads, nil)
	if err != nil {
		return nil, fmt.Errorf("gitsource: listing what the refs reach: %w", err)
	}
	reach := make(map[plumbing.Hash]struct{}, len(objs))
	for _, o := range objs {
		reach[o] = struct{}{}
	}
	return reach, nil
}

// deleteObjects deletes the loose objects stale and, when covered, the
// old packs other than the new one.
func deleteObjects(st storer.Storer, stale, oldPacks []plumbing.Hash, newPack plumbing.Hash, covered bool) error {
	los := st.(storer.LooseObjectStorer)
	for _, h := range stale {
		if err := los.DeleteLooseObject(h); err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) {
			return fmt.Errorf("gitsource: deleting a loose object: %w", err)
		}
	}
	if !covered {
		return nil // the next run packs what the refs reach now
	}
	pos := st.(storer.PackedObjectStorer)
	for _, h := range oldPacks {
		if h == newPack {
			continue // the same objects packed the same way
		}
		if err := pos.DeleteOldObjectPackAndIndex(h, time.Time{}); err != nil {
			return fmt.Errorf("gitsource: deleting an old pack: %w", err)
		}
	}
	return nil
}

// isLoose reports whether h is a loose object.
func isLoose(los storer.LooseObjectStorer, h plumbing.Hash) bool {
	_, err := los.LooseObjectTime(h)
	return err == nil
}

// reindex has go-git read the clone's pack indexes again.
func reindex(st storer.Storer) {
	if r, ok := st.(interface{ Reindex() }); ok {
		r.Reindex()
	}
}
