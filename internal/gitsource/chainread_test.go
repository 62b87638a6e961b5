package gitsource

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/listgen"
)

// shrinkingAndGrowing is a clone of a repository whose pushes each drop
// the last line of one list and add a line to another, housekept into one
// pack: main's shrinking list is at the end of the longest delta chain
// (the pack keeps the largest version whole), as is the oldest version of
// the growing one. It returns the clone's directory, the remote and the
// contents of both lists by commit, oldest commit first.
func shrinkingAndGrowing(t testing.TB, lines, pushes int) chainRepo {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{})
	shrinking := strings.SplitAfter(listgen.Dense{Seed: 23, V6Every: 4}.Text(lines), "\n")
	shrinking = shrinking[:len(shrinking)-1] // the empty string after the last newline
	growing := listgen.Sequential(lines)
	version := func(i int) map[string]string {
		return map[string]string{
			"_lists/shrinking.netset": strings.Join(shrinking[:len(shrinking)-i], ""),
			"_lists/growing.netset":   growing,
		}
	}
	url := srv.InitRepo("policies", version(0))
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url, Path: ".", Logger: hclog.NewNullLogger()})
	revs := map[string]map[string]string{}
	first := mustFetch(t, s).Main.Hash
	commits := []string{first}
	revs[first] = version(0)
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
	if h, err := s.Housekeep(context.Background(), nil); err != nil || !h.Ran || h.After.LooseObjects != 0 || h.After.Packs != 1 {
		t.Fatalf("housekeeping = %+v, %v; want everything in one pack", h, err)
	}
	return chainRepo{srv: srv, url: url, work: work, dir: s.cfg.Dir, commits: commits, revs: revs}
}

// chainRepo is what shrinkingAndGrowing made: the remote at url, a user's
// clone of it in work, the housekept clone in dir, and the contents of the
// lists by commit, oldest commit first.
type chainRepo struct {
	srv            *gittest.Server
	url, work, dir string
	commits        []string
	revs           map[string]map[string]string
}

// Reading a version at the end of a delta chain from the pack, through a
// new Source (what the leader does first after a restart), allocates and
// keeps a small multiple of the files read, not one copy per link of the
// chain: a shrinking list's newest version at main, the oldest version
// of a growing one at the first commit. Not parallel: it measures the
// process's heap, so nothing else may allocate meanwhile.
func TestReadingTheEndOfADeltaChainCostsAboutTheFile(t *testing.T) {
	r := shrinkingAndGrowing(t, 100_000, 10)
	for _, c := range []struct{ name, commit string }{{"main", r.commits[len(r.commits)-1]}, {"oldest", r.commits[0]}} {
		t.Run(c.name, func(t *testing.T) {
			want := r.revs[c.commit]
			size := uint64(0)
			for _, data := range want {
				size += uint64(len(data))
			}
			s := newSource(t, Config{URL: r.url, Path: ".", Dir: r.dir})
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
			if allocated > 4*size { // about 2x; go-git allocated 20x
				t.Errorf("reading %d bytes of files allocated %d bytes, want at most 4x", size, allocated)
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

// A thin fetch into a clone restarted after housekeeping (no blob cache)
// resolves the pushed delta on the version of main the clone has, at the
// end of a chain for a shrinking list: reading that base costs about what
// it costs for a whole one (go-git's own resolution of a delta, a dozen
// copies of the file, included), not a copy per link. Not parallel: it
// measures the heap.
func TestThinFetchOnTheEndOfADeltaChainCostsAboutTheFile(t *testing.T) {
	r := shrinkingAndGrowing(t, 100_000, 10)
	head := r.revs[r.commits[len(r.commits)-1]]
	s := newSource(t, Config{URL: r.url, Path: ".", Dir: r.dir})
	perByte := map[string]float64{}
	for _, c := range []struct{ name, file, content string }{
		{"chained", "_lists/shrinking.netset", dropLastLine(head["_lists/shrinking.netset"])},
		{"whole", "_lists/growing.netset", head["_lists/growing.netset"] + "198.51.100.1/32\n"},
	} {
		pushed := r.srv.Commit(r.work, map[string]string{c.file: c.content}, "one line changed")
		r.srv.Push(r.work, "main")
		var before, fetched runtime.MemStats
		settle()
		runtime.ReadMemStats(&before)
		if got := mustFetch(t, s).Main.Hash; got != pushed {
			t.Fatalf("fetched %s, want %s", got, pushed)
		}
		runtime.ReadMemStats(&fetched)
		perByte[c.name] = float64(fetched.TotalAlloc-before.TotalAlloc) / float64(len(c.content))
		t.Logf("a thin fetch on a %s base of %d bytes allocated %.1fx the file", c.name, len(c.content), perByte[c.name])
		files, err := s.Files(pushed)
		if err != nil || string(files[c.file]) != c.content {
			t.Fatalf("Files(%s) after the fetch: %v", pushed, err)
		}
	}
	if perByte["chained"] > perByte["whole"]+4 {
		t.Errorf("a thin fetch on a chained base allocated %.1fx the file, on a whole one %.1fx: want at most 4x more",
			perByte["chained"], perByte["whole"])
	}
}

// dropLastLine is list without its last line.
func dropLastLine(list string) string {
	return list[:strings.LastIndex(list[:len(list)-1], "\n")+1]
}

// What readChain leaves to go-git (a chain longer than it reads) is
// resolved by go-git, which puts each version it builds in its object
// cache: the clone's keeps no large object, so that a read does not hold
// six versions of a list (96 MiB) for as long as the Source lives; and
// the content read is held in a buffer of its size, not twice that. Not
// parallel: it measures the heap.
func TestGoGitKeepsNoVersionOfAChainInItsCache(t *testing.T) {
	r := shrinkingAndGrowing(t, 100_000, 10)
	content := r.revs[r.commits[len(r.commits)-1]]["_lists/shrinking.netset"]
	s := newSource(t, Config{URL: r.url, Path: ".", Dir: r.dir})
	var before, settled runtime.MemStats
	settle()
	runtime.ReadMemStats(&before)
	data, err := readByGoGit(s, plumbing.ComputeHash(plumbing.BlobObject, []byte(content)))
	settle()
	runtime.ReadMemStats(&settled)
	if err != nil || string(data) != content {
		t.Fatalf("reading main's list through go-git: %v", err)
	}
	kept := int64(settled.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("list %d bytes: go-git kept %d (%.1fx)", len(content), kept, float64(kept)/float64(len(content)))
	if kept > int64(len(content)+len(content)/2) {
		t.Errorf("reading a %d-byte list through go-git kept %d bytes on the heap, want at most 1.5x", len(content), kept)
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(data)
}

// readByGoGit reads the blob h from the Source's storage as go-git does.
func readByGoGit(s *Source, h plumbing.Hash) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	blob, err := object.GetBlob(s.repo.Storer, h)
	if err != nil {
		return nil, err
	}
	return readAll(blob)
}
