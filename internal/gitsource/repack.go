package gitsource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
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

// planRepack sets the keep refs, removes stale temporary files, and when
// the clone is past its limits takes the snapshot the pack is written
// from; it holds opMu and mu (and its caller hkMu, as removeTemp needs).
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
	// What a failed fetch or a stopped node left goes on every run, so
	// that a clone under its limits does not keep it on disk.
	if err := removeTemp(filepath.Join(s.cfg.Dir, "objects")); err != nil {
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

// newPack is the pack writePack wrote, in dir until swapPack moves it
// into the clone, and the objects it holds.
type newPack struct {
	dir     string
	hash    plumbing.Hash
	objects map[plumbing.Hash]struct{}
}

// writePack writes everything heads reach in the clone at dir into one
// new pack (and its index) under out/objects/pack, through storages of
// its own: the Source's storage is not safe for concurrent use, and
// objects files are never rewritten, so reading them while a fetch adds
// others is. The clone does not see the pack before swapPack moves it in.
// It runs in the repack child (repackchild.go), or in this process.
func writePack(ctx context.Context, dir, out string, heads []plumbing.Hash, window uint) (plumbing.Hash, error) {
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(),
		filesystem.Options{LargeObjectThreshold: largeObjectBytes})
	objs, err := revlist.Objects(st, heads, nil)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitsource: listing what the refs reach: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return plumbing.ZeroHash, err
	}
	w, err := filesystem.NewStorage(osfs.New(out), cache.NewObjectLRU(0)).PackfileWriter()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitsource: writing a pack: %w", err)
	}
	h, err := packfile.NewEncoder(ctxWriter{ctx, w}, st, false).Encode(objs, window)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitsource: repacking the clone: %w", err)
	}
	return h, nil
}

// packHeads are the commits the plan packs what they reach of.
func packHeads(plan repackPlan) []plumbing.Hash {
	return slices.AppendSeq(slices.Clone(plan.extra), maps.Values(plan.refs))
}

// readPack lists the objects of pack h in out from its index, which is
// as large as the pack's object count (28 bytes each, and the map's).
func readPack(out string, h plumbing.Hash) (newPack, error) {
	f, err := os.Open(filepath.Join(out, "objects", "pack", "pack-"+h.String()+".idx"))
	if err != nil {
		return newPack{}, fmt.Errorf("gitsource: reading the new pack's index: %w", err)
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReader(f)).Decode(idx); err != nil {
		return newPack{}, fmt.Errorf("gitsource: reading the new pack's index: %w", err)
	}
	iter, err := idx.Entries()
	if err != nil {
		return newPack{}, fmt.Errorf("gitsource: reading the new pack's index: %w", err)
	}
	defer iter.Close()
	p := newPack{dir: out, hash: h, objects: map[plumbing.Hash]struct{}{}}
	for {
		e, err := iter.Next()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return newPack{}, fmt.Errorf("gitsource: reading the new pack's index: %w", err)
		}
		p.objects[e.Hash] = struct{}{}
	}
}

// installPack moves the new pack into the clone's objects/pack, its
// index first: go-git lists a clone's packs by their .pack files, so a
// pack it lists always has its index. The caller holds opMu and mu.
func installPack(objects string, pack newPack) error {
	from, to := filepath.Join(pack.dir, "objects", "pack"), filepath.Join(objects, "pack")
	for _, ext := range []string{".idx", ".pack"} {
		name := "pack-" + pack.hash.String() + ext
		if err := os.Rename(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
			return fmt.Errorf("gitsource: moving the new pack in: %w", err)
		}
	}
	return nil
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
	objects := filepath.Join(s.cfg.Dir, "objects")
	if err := installPack(objects, pack); err != nil {
		return ObjectStats{}, err
	}
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
