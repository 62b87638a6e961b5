package reconcile

import (
	"bytes"
	"maps"
	"strconv"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestLoopStagesALargeTreeInChunks (issue 23): a valid tree over the one
// entry limit (a large named list) is staged in chunks, and a tree within
// it still in one version-1 Stage. The validator leaves the list out (the
// list budgets are another package's).
func TestLoopStagesALargeTreeInChunks(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	var list bytes.Buffer
	for i := 0; list.Len() <= raftstore.MaxInlineBundleBytes; i++ {
		list.WriteString("10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + "/32\n")
	}
	files := webPolicy("a")
	files["_lists/blocklist.netset"] = list.String()
	repo.Commit("main", files)
	l := newLoop(t, store, repo, fixedMembers{"n1"})
	l.cfg.Validator = func(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) Validation {
		code := maps.Clone(files)
		delete(code, "_lists/blocklist.netset")
		return Validate(code, lopts, eopts)
	}
	runLoop(t, l)
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	g := gen(t, store, 1)
	if !bytes.Equal(g.Files["_lists/blocklist.netset"], list.Bytes()) || len(g.Chunked) != len(files) {
		t.Fatalf("staged generation: %d files, %d chunked", len(g.Files), len(g.Chunked))
	}
	if n := store.Count(raftstore.TypePutChunks); n == 0 {
		t.Fatal("a tree over MaxInlineBundleBytes was staged without chunks")
	}
}
