package gitsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// A fetch into a clone that has refs stores what it brings loose
// (thinpack.go): about 5 MB per version of a 1,000,000-entry list, and
// nothing else ever removes them, nor the objects of a branch deleted
// upstream. Housekeeping does what `git gc --auto` does for a daemon:
// when the loose objects or the packs pass these limits, everything the
// refs reach goes into one pack (deltas between the versions of a list)
// and the rest is deleted.
const (
	// gcLooseObjects is git's gc.auto halved: a pass fetches a handful of
	// objects per commit, so this is a few hundred pushes of small files.
	gcLooseObjects = 3000
	// gcLooseBytes is about nine versions of a 1,000,000-entry list: a
	// run costs seconds to a minute of CPU and a few hundred MB of heap
	// for such a list (docs/git.md), so not every few pushes.
	gcLooseBytes = 64 << 20
	// gcPacks is the number of packs (each first fetch after a restart
	// into an empty clone, and each housekeeping, leaves one).
	gcPacks = 8
	// gcWindow is how many objects before it (by size) each object is
	// tried as a delta on. The versions of a list that grows or shrinks
	// by a line are next to each other, so one is enough, where git's
	// default of 10 keeps ten versions and their delta indexes in memory
	// and tries each: measured in docs/git.md.
	gcWindow = 2
)

// GCLimits are the thresholds past which Housekeep repacks: more loose
// objects, or more bytes of them, or more packs than these. A negative
// LooseObjects repacks at every call.
type GCLimits struct {
	LooseObjects int
	LooseBytes   int64
	Packs        int
}

// gcLimits are the thresholds of one Source; the tests lower them.
type gcLimits struct {
	looseObjects int
	looseBytes   int64
	packs        int
	window       uint
}

var defaultGCLimits = gcLimits{looseObjects: gcLooseObjects, looseBytes: gcLooseBytes, packs: gcPacks, window: gcWindow}

// ObjectStats is what the clone's object directory holds.
type ObjectStats struct {
	LooseObjects int
	LooseBytes   int64
	Packs        int
	PackBytes    int64
}

// Bytes is the directory's size in objects.
func (o ObjectStats) Bytes() int64 { return o.LooseBytes + o.PackBytes }

// Housekeeping is what one Housekeep did; Ran is false when nothing was
// past its limit.
type Housekeeping struct {
	Ran           bool
	Before, After ObjectStats
	Took          time.Duration
	// ChildPeakRSS is the repack child's peak resident memory in bytes;
	// 0 when the pack was written in this process.
	ChildPeakRSS int64
}

// Housekeep repacks the clone when its loose objects or packs pass the
// limits, and deletes what no ref reaches: objects of pushes since
// overwritten, of branches and pull requests gone upstream, of a commit
// whose push was refused once an hour has passed (its caller may push it
// to a branch meanwhile: unpushedKeep). keep names the commits the cluster still
// records (generation number to commit): each is held by a ref under
// refs/reconciler/generations/, set and removed here, so that a rollback
// to a generation whose branch history was rewritten still finds it.
//
// The expensive part, writing the new pack (an inflate and a deflate of
// every object the refs reach, go-git's delta search: seconds to a minute
// for a large list's history, docs/git.md), reads a snapshot of the refs
// through its own storage and holds no lock: fetches, pushes and reads go
// on meanwhile. It runs in a child of Config.Repack.Path when set, under
// a memory limit, and a cancelled ctx kills it (repackchild.go). The
// locks are held to take the snapshot and to swap the pack in (delete
// what it replaced, prune), a listing and a few deletes. A clone under
// its limits costs one listing of the objects directory.
func (s *Source) Housekeep(ctx context.Context, keep map[uint64]string) (Housekeeping, error) {
	s.hkMu.Lock()
	defer s.hkMu.Unlock()
	lim := s.gc
	if lim == (gcLimits{}) {
		lim = defaultGCLimits
	}
	plan, err := planRepack(ctx, s, keep, lim)
	if err != nil || plan.skip {
		return plan.result(), err
	}
	start := time.Now()
	if s.packing != nil {
		s.packing()
	}
	pack, rss, err := writeNewPack(ctx, s.cfg.Dir, s.cfg.Repack, plan, lim.window)
	if err != nil {
		return plan.result(), err
	}
	defer os.RemoveAll(pack.dir)
	h := plan.result()
	if h.After, err = swapPack(s, plan, pack); err != nil {
		return h, err
	}
	h.Ran, h.Took, h.ChildPeakRSS = true, time.Since(start), rss
	s.log.Info("repacked the clone", "took", h.Took.Round(time.Millisecond),
		"bytes_before", h.Before.Bytes(), "bytes_after", h.After.Bytes(),
		"loose_before", h.Before.LooseObjects, "packs_before", h.Before.Packs, "child_peak_rss", rss)
	return h, nil
}

// writeNewPack writes the plan's pack into a fresh directory under the
// objects/pack of the clone at dir (the same file system, so that
// swapPack renames it in), in the repack child when there is a binary to
// run: a child killed by ctx or by its memory limit leaves nothing, the
// directory removed and the clone as it was. rss is the child's peak
// resident memory (0 in process).
func writeNewPack(ctx context.Context, dir string, child RepackChild, plan repackPlan, window uint) (newPack, int64, error) {
	packs := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(packs, 0o755); err != nil {
		return newPack{}, 0, fmt.Errorf("gitsource: %w", err)
	}
	out, err := os.MkdirTemp(packs, repackTempPrefix)
	if err != nil {
		return newPack{}, 0, fmt.Errorf("gitsource: %w", err)
	}
	heads := packHeads(plan)
	var h plumbing.Hash
	var rss int64
	if child.Path != "" {
		req := repackRequest{Dir: dir, Out: out, Window: window}
		for _, head := range heads {
			req.Heads = append(req.Heads, head.String())
		}
		h, rss, err = child.write(ctx, req)
	} else {
		h, err = writePack(ctx, dir, out, heads, window)
	}
	var pack newPack
	if err == nil {
		pack, err = readPack(out, h)
	}
	if err != nil {
		os.RemoveAll(out)
		return newPack{}, rss, err
	}
	return pack, rss, nil
}

// repackTempPrefix starts the name of the directory under objects/pack
// that Housekeep's new pack is written in before swapPack moves it in.
const repackTempPrefix = "tmp_repack_"

// removeTemp deletes the temporary files of objects and packs a fetch or
// push that failed left behind (ours, thinpack.go, and go-git's), and the
// directory of a repack a node stopped in; the caller holds opMu, so none
// is being written, and hkMu, so no repack is.
func removeTemp(objects string) error {
	for _, pattern := range []string{"tmp_obj_*", "pack/tmp_obj_*", "pack/tmp_pack_*", "pack/" + repackTempPrefix + "*"} {
		stale, err := filepath.Glob(filepath.Join(objects, pattern))
		if err != nil {
			return fmt.Errorf("gitsource: %w", err)
		}
		for _, f := range stale {
			if err := os.RemoveAll(f); err != nil {
				return fmt.Errorf("gitsource: removing %s: %w", filepath.Base(f), err)
			}
		}
	}
	return nil
}

// objectStats lists the objects directory: loose objects are in the
// two-hex-digit directories, packs in pack/.
func objectStats(objects string) (ObjectStats, error) {
	var st ObjectStats
	dirs, err := os.ReadDir(objects)
	if err != nil {
		return st, fmt.Errorf("gitsource: listing the clone's objects: %w", err)
	}
	for _, d := range dirs {
		name := d.Name()
		if !d.IsDir() || len(name) != 2 || strings.Trim(name, "0123456789abcdef") != "" {
			continue
		}
		files, err := os.ReadDir(filepath.Join(objects, name))
		if err != nil {
			return st, fmt.Errorf("gitsource: listing the clone's objects: %w", err)
		}
		for _, f := range files {
			if info, err := f.Info(); err == nil && info.Mode().IsRegular() {
				st.LooseObjects++
				st.LooseBytes += info.Size()
			}
		}
	}
	packs, err := os.ReadDir(filepath.Join(objects, "pack"))
	if err != nil && !os.IsNotExist(err) {
		return st, fmt.Errorf("gitsource: listing the clone's packs: %w", err)
	}
	for _, f := range packs {
		if ext := filepath.Ext(f.Name()); ext != ".pack" && ext != ".idx" {
			continue
		}
		if info, err := f.Info(); err == nil {
			st.PackBytes += info.Size()
			if filepath.Ext(f.Name()) == ".pack" {
				st.Packs++
			}
		}
	}
	return st, nil
}
