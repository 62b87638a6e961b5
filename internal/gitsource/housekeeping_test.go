package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/listgen"
)

func mustHousekeep(t *testing.T, s *Source) Housekeeping {
	t.Helper()
	h, err := s.Housekeep(context.Background(), nil)
	if err != nil {
		t.Fatalf("Housekeep: %v", err)
	}
	return h
}

// Pushes of one-line changes to a large list each leave a loose copy of
// it in the clone; housekeeping packs them as deltas, and every revision
// stays readable, from the blob cache and from the pack, and the next
// thin fetch still resolves its delta on a packed base.
func TestHousekeepingBoundsTheCloneOfAChangingList(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t, gittest.Options{})
	list := listgen.Sequential(100_000)
	url := srv.InitRepo("policies", map[string]string{"_lists/blocklist.netset": list})
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url, Path: "."})
	first := mustFetch(t, s).Main.Hash
	one, err := objectStats(s.cfg.Dir + "/objects")
	if err != nil {
		t.Fatal(err)
	}
	if h := mustHousekeep(t, s); h.Ran {
		t.Fatalf("housekeeping ran on a fresh clone: %+v", h)
	}
	revs := map[string]string{first: list}
	const pushes = 10
	for i := range pushes {
		list += fmt.Sprintf("192.0.2.%d/32\n", i)
		head := srv.Commit(work, map[string]string{"_lists/blocklist.netset": list}, "one more")
		srv.Push(work, "main")
		if got := mustFetch(t, s).Main.Hash; got != head {
			t.Fatalf("fetched %s, want %s", got, head)
		}
		revs[head] = list
	}
	s.gc = gcLimits{looseObjects: 1000, looseBytes: 2 * one.Bytes(), packs: 8, window: gcWindow}
	h := mustHousekeep(t, s)
	if !h.Ran || h.Before.LooseBytes < pushes*one.Bytes()/2 {
		t.Fatalf("housekeeping = %+v, want a run over %d pushes of a %d-byte version", h, pushes, one.Bytes())
	}
	if h.After.LooseObjects != 0 || h.After.Packs != 1 || h.After.Bytes() > 2*one.Bytes() {
		t.Errorf("after housekeeping %+v, want one pack under twice one version (%d bytes)", h.After, one.Bytes())
	}
	t.Logf("one version %d bytes; %d pushes: %d bytes loose, %d bytes after housekeeping in %v",
		one.Bytes(), pushes, h.Before.Bytes(), h.After.Bytes(), h.Took)
	fresh := newSource(t, Config{URL: url, Path: ".", Dir: s.cfg.Dir}) // no blob cache: read from the pack
	for _, src := range []*Source{s, fresh} {
		for rev, want := range revs {
			files, err := src.Files(rev)
			if err != nil || string(files["_lists/blocklist.netset"]) != want {
				t.Fatalf("Files(%s) after housekeeping: %v", rev, err)
			}
		}
	}
	list += "198.51.100.1/32\n"
	head := srv.Commit(work, map[string]string{"_lists/blocklist.netset": list}, "after the repack")
	srv.Push(work, "main")
	before := srv.BytesSent()
	if got := mustFetch(t, fresh).Main.Hash; got != head {
		t.Fatalf("fetched %s, want %s", got, head)
	}
	if sent := srv.BytesSent() - before; sent > 16<<10 {
		t.Errorf("a thin fetch on a packed base downloaded %d bytes", sent)
	}
	if files, err := fresh.Files(head); err != nil || string(files["_lists/blocklist.netset"]) != list {
		t.Fatalf("Files(%s) after a thin fetch on the pack: %v", head, err)
	}
}

// The objects of branches deleted upstream, packed or loose, are gone
// after housekeeping, as are the temporary files of a failed fetch; the
// live branch's objects are not.
func TestHousekeepingPrunesDeletedBranches(t *testing.T) {
	t.Parallel()
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url})
	mustFetch(t, s)
	s.gc = gcLimits{looseObjects: 0, looseBytes: 1 << 40, packs: 8, window: gcWindow}
	var gone []string
	for _, branch := range []string{"packed", "loose"} {
		srv.Checkout(work, "main")
		srv.CreateBranch(work, branch)
		gone = append(gone, srv.Commit(work, map[string]string{"policies/" + branch + "/policy.toml": policyFile("deny", "", "request.path == '/"+branch+"'")}, branch))
		srv.Push(work, branch)
		mustFetch(t, s)
		if branch == "packed" {
			if h := mustHousekeep(t, s); !h.Ran || h.After.LooseObjects != 0 {
				t.Fatalf("housekeeping = %+v, want everything packed", h)
			}
		}
	}
	for _, branch := range []string{"packed", "loose"} {
		srv.DeleteRef("policies", "refs/heads/"+branch)
	}
	refs := mustFetch(t, s)
	stale := []string{filepath.Join(s.cfg.Dir, "objects", "tmp_obj_1"), filepath.Join(s.cfg.Dir, "objects", "pack", "tmp_pack_1")}
	for _, f := range stale { // what a fetch killed mid-object leaves
		if err := os.WriteFile(f, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(refs.Branches) != 1 {
		t.Fatalf("branches after the deletions: %v", refs.Branches)
	}
	if h := mustHousekeep(t, s); !h.Ran || h.After.LooseObjects != 0 || h.After.Packs != 1 {
		t.Fatalf("housekeeping = %+v, want one pack", h)
	}
	for _, f := range stale {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s after housekeeping: %v, want it removed", f, err)
		}
	}
	for _, c := range gone {
		if _, err := s.repo.Storer.EncodedObject(plumbing.AnyObject, plumbing.NewHash(c)); !errors.Is(err, plumbing.ErrObjectNotFound) {
			t.Errorf("commit %s of a deleted branch: %v, want it pruned", c, err)
		}
	}
	if _, err := s.Files(refs.Main.Hash); err != nil {
		t.Fatalf("Files(main) after pruning: %v", err)
	}
}

// hasObject reports whether the clone of s holds the object h.
func hasObject(s *Source, h string) bool {
	_, err := s.repo.Storer.EncodedObject(plumbing.AnyObject, plumbing.NewHash(h))
	return err == nil
}

// keepRefs are the refs under keepPrefix in the clone of s.
func keepRefs(t *testing.T, s *Source) map[string]string {
	t.Helper()
	refs, err := hashRefs(s.repo.Storer)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for name, h := range refs {
		if n, ok := strings.CutPrefix(name.String(), keepPrefix); ok {
			kept[n] = h.String()
		}
	}
	return kept
}

// A commit the caller keeps survives housekeeping after the force-push
// that left no branch reaching it; once the caller stops keeping it, its
// ref goes and the next run prunes it. A commit the clone never had is
// not kept, and does not fail the run.
func TestHousekeepingKeepsCommitsNoBranchReaches(t *testing.T) {
	t.Parallel()
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url, GC: GCLimits{LooseObjects: -1}})
	first := mustFetch(t, s).Main.Hash
	second := srv.Commit(work, map[string]string{"policies/web/policy.toml": policyFile("deny", "", "true")}, "second")
	srv.Push(work, "main")
	mustFetch(t, s)
	srv.Git(work, "checkout", "-q", "--orphan", "rewritten")
	head := srv.Commit(work, map[string]string{"policies/web/policy.toml": policyFile("allow", "", "false")}, "rewritten")
	srv.Git(work, "push", "-q", "-f", "origin", "rewritten:main")
	if got := mustFetch(t, s).Main.Hash; got != head {
		t.Fatalf("fetched %s, want %s", got, head)
	}
	never := strings.Repeat("ab", 20)
	keep := map[uint64]string{1: first, 2: second, 3: head, 4: never}
	if h, err := s.Housekeep(context.Background(), keep); err != nil || !h.Ran {
		t.Fatalf("Housekeep = %+v, %v", h, err)
	}
	want := map[string]string{"1": first, "2": second, "3": head}
	if got := keepRefs(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kept refs %v, want %v", got, want)
	}
	for _, c := range []string{first, second} {
		if _, err := s.Files(c); err != nil {
			t.Errorf("Files(%s) of a kept commit after housekeeping: %v", c, err)
		}
	}
	if h, err := s.Housekeep(context.Background(), map[uint64]string{3: head}); err != nil || !h.Ran {
		t.Fatalf("Housekeep = %+v, %v", h, err)
	}
	if got := keepRefs(t, s); len(got) != 1 || got["3"] != head {
		t.Errorf("kept refs %v, want only generation 3's", got)
	}
	for _, c := range []string{first, second} {
		if hasObject(s, c) {
			t.Errorf("commit %s, kept no more, is still in the clone", c)
		}
	}
}

// A fetch and a read go on while housekeeping writes its pack (they would
// wait for the whole repack if it held the clone's locks), and what they
// bring or reach again meanwhile survives the swap: a new commit fetched
// loose, and a branch recreated upstream on a commit that only the old
// pack holds.
func TestHousekeepingLetsFetchesRunWhileItPacks(t *testing.T) {
	t.Parallel()
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	s := newSource(t, Config{URL: url, GC: GCLimits{LooseObjects: -1}})
	mustFetch(t, s)
	srv.CreateBranch(work, "gone")
	gone := srv.Commit(work, map[string]string{"policies/gone/policy.toml": policyFile("deny", "", "true")}, "gone")
	srv.Push(work, "gone")
	mustFetch(t, s)
	mustHousekeep(t, s) // gone's commit is in the pack now
	srv.DeleteRef("policies", "refs/heads/gone")
	mustFetch(t, s)
	srv.Checkout(work, "main")
	head := srv.Commit(work, map[string]string{"policies/web/policy.toml": policyFile("deny", "", "false")}, "during")
	srv.Push(work, "main")
	var during *Refs
	s.packing = func() {
		srv.SetRef("policies", "refs/heads/gone", gone)
		during = mustFetch(t, s)
		if _, err := s.Files(during.Main.Hash); err != nil {
			t.Errorf("Files while packing: %v", err)
		}
	}
	if h := mustHousekeep(t, s); !h.Ran {
		t.Fatalf("housekeeping did not run: %+v", h)
	}
	if during == nil || during.Main.Hash != head || during.Branches["gone"].Hash != gone {
		t.Fatalf("refs fetched while packing: %+v", during)
	}
	for _, c := range []string{head, gone} {
		if _, err := s.Files(c); err != nil {
			t.Errorf("Files(%s) after housekeeping: %v", c, err)
		}
	}
	s.packing = nil
	if h := mustHousekeep(t, s); !h.Ran || h.After.Packs != 1 || h.After.LooseObjects != 0 {
		t.Errorf("the next housekeeping = %+v, want one pack", h)
	}
	for _, c := range []string{head, gone} {
		if _, err := s.Files(c); err != nil {
			t.Errorf("Files(%s) after the next housekeeping: %v", c, err)
		}
	}
}

// A rollback whose push to main is refused pushes its revert commit to a
// branch next (reconcile's revertAsPull), in a second call. Housekeeping
// runs beside it: a run that packed while the revert was written and
// refused swaps its pack in between the two calls, and deleted the revert
// commit, which no ref reaches yet, so the branch push failed. A commit
// the Source wrote and could not push is kept for a while.
func TestHousekeepingKeepsARefusedCommitForItsBranch(t *testing.T) {
	t.Parallel()
	srv, url := newRepo(t, gittest.Options{})
	before, _ := moveOn(t, srv, url)
	s := newSource(t, Config{URL: url, GC: GCLimits{LooseObjects: -1}})
	mustFetch(t, s)
	srv.RejectPushes("policies", "main", true)
	var refused *PushRefusedError
	s.packing = func() { // the revert is written and refused while the pack is
		_, err := s.Revert(context.Background(), RevertRequest{ToHash: before, Message: "Revert"})
		if !errors.As(err, &refused) {
			t.Errorf("Revert: %v, want a PushRefusedError", err)
		}
	}
	if h := mustHousekeep(t, s); !h.Ran {
		t.Fatal("housekeeping did not run")
	}
	if refused == nil {
		t.FailNow()
	}
	if err := s.PushBranch(context.Background(), refused.Commit, "reconciler/revert"); err != nil {
		t.Fatalf("pushing the refused revert to a branch after housekeeping: %v", err)
	}
	if got := srv.Head("policies", "reconciler/revert"); got != refused.Commit {
		t.Errorf("branch at %s, want %s", got, refused.Commit)
	}
}
