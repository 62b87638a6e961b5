package gitsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
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
	// run costs seconds to a minute of holding the clone for such a list
	// (docs/git.md), so not every few pushes.
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
}

// Housekeep repacks the clone when its loose objects or packs pass the
// limits, and deletes what no ref reaches: objects of pushes since
// overwritten, of branches and pull requests gone upstream, of a commit
// whose push was refused. The caller runs it when idle, off the path of
// push→Active; it holds the storage (reads wait) for the whole run, which
// costs an inflate and a deflate of every object the refs reach, go-git's
// delta search and its resolution of the pack's delta chains (seconds to
// a minute for a large list's history, docs/git.md). A clone under its limits costs one listing of the
// objects directory.
func (s *Source) Housekeep(ctx context.Context) (Housekeeping, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if err := ctx.Err(); err != nil {
		return Housekeeping{}, err
	}
	objects := filepath.Join(s.cfg.Dir, "objects")
	before, err := objectStats(objects)
	if err != nil {
		return Housekeeping{}, err
	}
	h := Housekeeping{Before: before, After: before}
	lim := s.gc
	if lim == (gcLimits{}) {
		lim = defaultGCLimits
	}
	if before.LooseObjects <= lim.looseObjects && before.LooseBytes <= lim.looseBytes && before.Packs <= lim.packs {
		return h, nil
	}
	start := time.Now()
	s.mu.Lock()
	err = repack(s.repo, objects, lim.window)
	s.mu.Unlock()
	if err != nil {
		return h, err
	}
	h.Ran, h.Took = true, time.Since(start)
	if h.After, err = objectStats(objects); err != nil {
		return h, err
	}
	s.log.Info("repacked the clone", "took", h.Took.Round(time.Millisecond),
		"bytes_before", before.Bytes(), "bytes_after", h.After.Bytes(),
		"loose_before", before.LooseObjects, "packs_before", before.Packs)
	return h, nil
}

// repack packs what the refs of repo reach and deletes the rest; the
// caller holds the source's opMu and mu. go-git's RepackObjects writes the new pack, deletes the
// loose objects it packed and every other pack; Prune then deletes the
// loose objects no ref reaches. No grace period, as git keeps for
// writers racing it: the locks held exclude every writer of the clone.
func repack(repo *git.Repository, objects string, window uint) error {
	// go-git reads the window from the clone's configuration only.
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("gitsource: reading the clone's configuration: %w", err)
	}
	if cfg.Pack.Window != window {
		cfg.Pack.Window = window
		if err := repo.SetConfig(cfg); err != nil {
			return fmt.Errorf("gitsource: setting the pack window: %w", err)
		}
	}
	if err := repo.RepackObjects(&git.RepackConfig{}); err != nil {
		return fmt.Errorf("gitsource: repacking the clone: %w", err)
	}
	// go-git keeps the index of every pack it has read: without this a
	// read could look an object up in a pack just deleted.
	if r, ok := repo.Storer.(interface{ Reindex() }); ok {
		r.Reindex()
	}
	err = repo.Prune(git.PruneOptions{Handler: func(h plumbing.Hash) error {
		return repo.DeleteObject(h)
	}})
	if err != nil {
		return fmt.Errorf("gitsource: pruning the clone: %w", err)
	}
	return removeTemp(objects)
}

// removeTemp deletes the temporary files of objects and packs a fetch or
// push that failed left behind (ours, thinpack.go, and go-git's); the
// caller holds opMu, so none is being written.
func removeTemp(objects string) error {
	for _, pattern := range []string{"tmp_obj_*", "pack/tmp_obj_*", "pack/tmp_pack_*"} {
		stale, err := filepath.Glob(filepath.Join(objects, pattern))
		if err != nil {
			return fmt.Errorf("gitsource: %w", err)
		}
		for _, f := range stale {
			if err := os.Remove(f); err != nil {
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
