package gitsource

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// shrinkingAndGrowing is a clone of a repository whose pushes each drop
// the last line of one list and add a line to another, housekept into one
// pack: main's shrinking list is at the end of the longest delta chain
// (the pack keeps the largest version whole), as is the oldest version of
// the growing one. It returns the clone's directory, the remote and the
// contents of both lists by commit, oldest commit first.
func shrinkingAndGrowing(t *testing.T, lines, pushes int) (dir, url string, commits []string, revs map[string]map[string]string) {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{})
	shrinking := strings.SplitAfter(randomList(lines), "\n")
	shrinking = shrinking[:len(shrinking)-1] // the empty string after the last newline
	growing := bigList(lines)
	version := func(i int) map[string]string {
		return map[string]string{
			"_lists/shrinking.netset": strings.Join(shrinking[:len(shrinking)-i], ""),
			"_lists/growing.netset":   growing,
		}
	}
	url = srv.InitRepo("policies", version(0))
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url, Path: "."})
	revs = map[string]map[string]string{}
	first := mustFetch(t, s).Main.Hash
	commits, revs[first] = []string{first}, version(0)
	for i := 1; i <= pushes; i++ {
		growing += fmt.Sprintf("192.0.2.%d/32\n", i)
		head := srv.Commit(work, version(i), "one line less, one more")
		srv.Push(work, "main")
		if got := mustFetch(t, s).Main.Hash; got != head {
			t.Fatalf("fetched %s, want %s", got, head)
		}
		commits, revs[head] = append(commits, head), version(i)
	}
	s.gc = gcLimits{looseObjects: -1, window: gcWindow}
	if h := mustHousekeep(t, s); !h.Ran || h.After.LooseObjects != 0 || h.After.Packs != 1 {
		t.Fatalf("housekeeping = %+v, want everything in one pack", h)
	}
	return s.cfg.Dir, url, commits, revs
}

// Reading a version at the end of a delta chain from the pack, through a
// new Source (what the leader does first after a restart), allocates and
// keeps a small multiple of the files read, not one copy per link of the
// chain: a shrinking list's newest version at main, the oldest version
// of a growing one at the first commit. Not parallel: it measures the
// process's heap, so nothing else may allocate meanwhile.
func TestReadingTheEndOfADeltaChainCostsAboutTheFile(t *testing.T) {
	dir, url, commits, revs := shrinkingAndGrowing(t, 100_000, 10)
	for _, c := range []struct{ name, commit string }{{"main", commits[len(commits)-1]}, {"oldest", commits[0]}} {
		t.Run(c.name, func(t *testing.T) {
			want := revs[c.commit]
			size := uint64(0)
			for _, data := range want {
				size += uint64(len(data))
			}
			s := newSource(t, Config{URL: url, Path: ".", Dir: dir})
			var before, read, settled runtime.MemStats
			settle()
			runtime.ReadMemStats(&before)
			files, err := s.Files(c.commit)
			runtime.ReadMemStats(&read)
			settle()
			runtime.ReadMemStats(&settled)
			if err != nil {
				t.Fatalf("Files(%s): %v", c.commit, err)
			}
			for name, data := range want {
				if string(files[name]) != data {
					t.Fatalf("Files(%s)[%s] differs from what was pushed", c.commit, name)
				}
			}
			allocated := read.TotalAlloc - before.TotalAlloc
			kept := int64(settled.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("files %d bytes: allocated %d (%.1fx), kept %d (%.1fx)", size, allocated,
				float64(allocated)/float64(size), kept, float64(kept)/float64(size))
			if allocated > 3*size {
				t.Errorf("reading %d bytes of files allocated %d bytes, want at most 3x", size, allocated)
			}
			if kept > int64(size+size/2) {
				t.Errorf("reading %d bytes of files kept %d bytes on the heap, want at most 1.5x", size, kept)
			}
			runtime.KeepAlive(s)
			runtime.KeepAlive(files)
		})
	}
}

// settle collects twice: go-git pools its buffers, and a pool's contents
// survive one collection.
func settle() {
	runtime.GC()
	runtime.GC()
}
