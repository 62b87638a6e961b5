package gitsource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/listgen"
)

// holdFile, in a clone's directory, has the test binary's repack child
// create started in its Out directory and wait to be killed instead of
// packing: a write the test can cancel at a known point.
const holdFile = "repack-hold"

// repackWorker is the test binary run as RepackCommand (TestMain): the
// child `reconciler repack-worker` is, with the holdFile hook.
func repackWorker(limitArg string) int {
	limit, err := strconv.ParseUint(limitArg, 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var req repackRequest
	if json.Unmarshal(in, &req) == nil {
		if _, err := os.Stat(filepath.Join(req.Dir, holdFile)); err == nil {
			if err := os.WriteFile(filepath.Join(req.Out, "started"), nil, 0o644); err != nil {
				return 1
			}
			select {} // until killed
		}
	}
	if err := ServeRepack(context.Background(), bytes.NewReader(in), os.Stdout, limit); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testBinary is this test binary, which runs ServeRepack as
// RepackCommand.
func testBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// cloneFiles is every file under the clone's objects directory and its
// size: what a failed housekeeping must leave as it was.
func cloneFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			files[p] = info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// listClone is a clone that fetched four versions of a 20,000-entry list,
// all loose, and its source.
func listClone(t *testing.T, cfg Config) (*Source, string) {
	srv := gittest.NewServer(t, gittest.Options{})
	list := listgen.Dense{Seed: 5}.Text(20_000)
	url := srv.InitRepo("policies", map[string]string{"_lists/l.netset": list})
	work := srv.Clone(url)
	cfg.URL, cfg.Path, cfg.GC = url, ".", GCLimits{LooseObjects: -1}
	s := newSource(t, cfg)
	mustFetch(t, s)
	var head string
	for i := range 3 {
		list += fmt.Sprintf("192.0.2.%d/32\n", i)
		head = srv.Commit(work, map[string]string{"_lists/l.netset": list}, "one more")
		srv.Push(work, "main")
		mustFetch(t, s)
	}
	return s, head
}

// Cancelling housekeeping while the child writes its pack kills the
// child at once: Housekeep returns the context's error, the clone is as it
// was and readable, and the next run packs it.
func TestHousekeepingCancelKillsTheRepackChild(t *testing.T) {
	t.Parallel()
	s, head := listClone(t, Config{})
	if err := os.WriteFile(filepath.Join(s.cfg.Dir, holdFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := cloneFiles(t, s.cfg.Dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Housekeep(ctx, nil); done <- err }()
	for {
		started, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "objects", "pack", repackTempPrefix+"*", "started"))
		if len(started) > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Housekeep ended before its child started: %v", err)
		case <-time.After(time.Millisecond): // waiting for the child, not timing it
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Housekeep after cancel = %v, want context.Canceled", err)
	}
	if after := cloneFiles(t, s.cfg.Dir); !maps.Equal(before, after) {
		t.Fatalf("the clone changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := s.Files(head); err != nil {
		t.Fatalf("Files after a cancelled housekeeping: %v", err)
	}
	if err := os.Remove(filepath.Join(s.cfg.Dir, holdFile)); err != nil {
		t.Fatal(err)
	}
	if h := mustHousekeep(t, s); !h.Ran || h.After.Packs != 1 || h.After.LooseObjects != 0 {
		t.Fatalf("the next housekeeping = %+v, want one pack", h)
	}
	if _, err := s.Files(head); err != nil {
		t.Fatalf("Files after the next housekeeping: %v", err)
	}
}

// A child that exceeds its memory limit ends, and Housekeep reports it,
// saying what to do; the clone is as it was, and readable, and a run with
// room packs it.
func TestHousekeepingRepackChildOverItsMemoryLimit(t *testing.T) {
	t.Parallel()
	s, head := listClone(t, Config{Repack: RepackChild{Path: testBinary(t), MemoryLimit: 1 << 20}})
	before := cloneFiles(t, s.cfg.Dir)
	_, err := s.Housekeep(context.Background(), nil)
	var re *repackError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "out of memory") ||
		!strings.Contains(err.Error(), "repack_memory_limit_bytes") {
		t.Fatalf("Housekeep with a 1 MiB child = %v, want the child's out of memory and what to do", err)
	}
	if after := cloneFiles(t, s.cfg.Dir); !maps.Equal(before, after) {
		t.Fatalf("the clone changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := s.Files(head); err != nil {
		t.Fatalf("Files after the child failed: %v", err)
	}
	s.cfg.Repack.MemoryLimit = 0
	if h := mustHousekeep(t, s); !h.Ran || h.After.Packs != 1 || h.After.LooseObjects != 0 {
		t.Fatalf("housekeeping with the default limit = %+v, want one pack", h)
	}
}

// Without a binary to run, the pack is written in this process, and the
// clone ends up the same.
func TestHousekeepingInProcess(t *testing.T) {
	t.Parallel()
	s, head := listClone(t, Config{})
	s.cfg.Repack = RepackChild{}
	if h := mustHousekeep(t, s); !h.Ran || h.After.Packs != 1 || h.After.LooseObjects != 0 {
		t.Fatalf("housekeeping in process = %+v, want one pack", h)
	}
	if _, err := s.Files(head); err != nil {
		t.Fatalf("Files after housekeeping: %v", err)
	}
}

// The directory of a pack write a node was stopped in is removed by the
// next housekeeping run even when the clone is under its limits: it was
// removed only when a run reached the swap, and stayed on disk (one
// pack's worth) while the clone stayed small.
func TestHousekeepingRemovesAStoppedRepackUnderTheLimits(t *testing.T) {
	t.Parallel()
	s, _ := listClone(t, Config{})
	s.gc = gcLimits{looseObjects: 1 << 30, looseBytes: 1 << 40, packs: 1 << 10}
	stale := filepath.Join(s.cfg.Dir, "objects", "pack", repackTempPrefix+"stopped")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "pack-x.pack"), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if h := mustHousekeep(t, s); h.Ran {
		t.Fatalf("housekeeping ran on a clone under its limits: %+v", h)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stopped repack's directory is still there: %v", err)
	}
}
