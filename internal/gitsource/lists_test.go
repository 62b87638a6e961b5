package gitsource

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/listgen"
	"github.com/policyrollout/reconciler/internal/policy"
)

// A list file over the 8 MiB tree budget is read, by Files and FS: lists
// have budgets of their own; a list over MaxListFileBytes is not.
func TestFilesReadsListsOverTheTreeBudget(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(srv.RepoPath("policies"))
	var b strings.Builder
	for i := 0; b.Len() <= MaxFilesSize; i++ {
		fmt.Fprintf(&b, "10.%d.%d.0/24\n", i>>8&255, i&255)
	}
	list := b.String()
	head := srv.Commit(work, map[string]string{"policies/_lists/blocklist.netset": list}, "a big list")
	srv.Push(work, "main")
	s := newSource(t, Config{URL: url}) // over HTTP: a fetch stores loose objects (thin packs)
	mustFetch(t, s)
	files, err := s.Files(head)
	if err != nil || len(files["_lists/blocklist.netset"]) != len(list) {
		t.Fatalf("Files = %v", err)
	}
	fsys, err := s.FS(head)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := fs.ReadFile(fsys, "_lists/blocklist.netset"); err != nil || len(data) != len(list) {
		t.Fatalf("ReadFile = %v", err)
	}
	huge := strings.Repeat("1.2.3.4\n", policy.MaxListFileBytes/8+1)
	head = srv.Commit(work, map[string]string{"policies/_lists/blocklist.netset": huge}, "too big a list")
	srv.Push(work, "main")
	mustFetch(t, s)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := s.Files(head); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "MaxListFileBytes") {
		t.Fatalf("Files = %v, want ErrTooLarge naming MaxListFileBytes", err)
	}
	// Refused by the size in its object header: the file is never read.
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("refusing a %d-byte list allocated %d bytes", len(huge), n)
	}
}

// A one-line change to a large list is fetched as a delta on the blob the
// clone has (a thin pack), not as the whole file again. Not parallel: it
// counts the process's allocations.
func TestFetchOfAOneLineListChangeIsADelta(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{Token: testToken})
	var b strings.Builder
	b.WriteString(listgen.Sequential(100_000))
	url := srv.InitRepo("policies", map[string]string{"_lists/blocklist.netset": b.String()})
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url, Token: testToken, Path: "."})
	mustFetch(t, s)
	b.WriteString("192.0.2.1/32\n")
	head := srv.Commit(work, map[string]string{"_lists/blocklist.netset": b.String()}, "one more")
	srv.Push(work, "main")
	before := srv.BytesSent()
	mustFetch(t, s)
	if sent := srv.BytesSent() - before; sent > 16<<10 {
		t.Errorf("the fetch of a one-line change to a %d-byte list downloaded %d bytes", b.Len(), sent)
	}
	// The fetch built the new content from the delta: reading the tree
	// takes it from there, not from the object it wrote.
	if _, ok := s.blobs.get(plumbing.ComputeHash(plumbing.BlobObject, []byte(b.String()))); !ok {
		t.Error("the list's new content is not kept after the fetch")
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	files, err := s.Files(head)
	runtime.ReadMemStats(&m1)
	if err != nil || string(files["_lists/blocklist.netset"]) != b.String() {
		t.Fatalf("Files after a thin fetch: %v", err)
	}
	// go-git reads a loose object whole to learn its size unless told
	// otherwise (largeObjectBytes).
	if n := m1.TotalAlloc - m0.TotalAlloc; n > uint64(b.Len())/2 {
		t.Errorf("reading the tree allocated %d bytes for a %d-byte list already built", n, b.Len())
	}
}

// A fetch into a clone that has refs (thin) brings a commit of many new
// files and a large one whole: every object is stored and readable.
func TestThinFetchOfManyNewObjects(t *testing.T) {
	t.Parallel()
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url})
	mustFetch(t, s)
	files := map[string]string{"policies/_lists/big.txt": strings.Repeat("host.example\n", 200_000)}
	for i := range 300 {
		files[fmt.Sprintf("policies/p%d/README", i)] = fmt.Sprintf("h%d.example\n", i)
	}
	head := srv.Commit(work, files, "many lists")
	srv.Push(work, "main")
	mustFetch(t, s)
	got, err := s.Files(head)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if string(got[strings.TrimPrefix(name, "policies/")]) != want {
			t.Fatalf("%s: %d bytes, want %d", name, len(got[strings.TrimPrefix(name, "policies/")]), len(want))
		}
	}
}

// The leader holds a list it read from git a second time in the
// generation its raft state assembled: ShareBlobs has the clone keep that
// copy instead of its own, and only a copy of the same content.
func TestShareBlobsKeepsTheCallersCopy(t *testing.T) {
	t.Parallel()
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(srv.RepoPath("policies"))
	var b strings.Builder
	for i := 0; b.Len() <= 2*cachedBlobMin; i++ {
		fmt.Fprintf(&b, "10.%d.%d.0/24\n", i>>8&255, i&255)
	}
	list := b.String()
	head := srv.Commit(work, map[string]string{"policies/_lists/blocklist.netset": list}, "a list")
	srv.Push(work, "main")
	s := newSource(t, Config{URL: url})
	mustFetch(t, s)
	read := func() []byte {
		t.Helper()
		files, err := s.Files(head)
		if err != nil || string(files["_lists/blocklist.netset"]) != list {
			t.Fatalf("Files = %v", err)
		}
		return files["_lists/blocklist.netset"]
	}
	kept := read()
	if &read()[0] != &kept[0] {
		t.Fatal("the list is not kept: nothing to share")
	}
	other := []byte(list)
	other[0] = '9' // same size, other content
	s.ShareBlobs(map[string][]byte{"_lists/other.netset": other})
	if &read()[0] != &kept[0] {
		t.Fatal("the clone took a copy of other content")
	}
	mine := []byte(list)
	s.ShareBlobs(map[string][]byte{"_lists/blocklist.netset": mine})
	if &read()[0] != &mine[0] {
		t.Error("the clone still holds its own copy of the list")
	}
}
