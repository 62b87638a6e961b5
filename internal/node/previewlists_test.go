package node

import (
	"bytes"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

type fixedState struct{ st *raftstore.State }

func (f fixedState) State() *raftstore.State { return f.st }

// storeLists finds an experiment's list in the chunks it carries, or a
// kept generation's file of the same content, and nothing else.
func TestStoreListsFindsCarriedAndKeptLists(t *testing.T) {
	carried, kept := []byte("10.0.0.0/8\n"), []byte("192.0.2.0/24\n")
	a, b := carried[:4], carried[4:]
	st := &raftstore.State{
		Chunks: map[string]raftstore.Chunk{raftstore.ChunkHash(a): {Data: a}, raftstore.ChunkHash(b): {Data: b}},
		Experiments: map[string]raftstore.Experiment{"policies/web/experiments/pr-1": {
			Lists: map[string][]string{policy.ContentHash(carried): {raftstore.ChunkHash(a), raftstore.ChunkHash(b)}}}},
		Generations: map[uint64]raftstore.Generation{1: {Number: 1, Files: map[string][]byte{"_lists/block.netset": kept}}},
		Active:      1,
	}
	find := storeLists(fixedState{st})
	if got := find(&policy.List{File: "_lists/block.netset", Hash: policy.ContentHash(carried)}); !bytes.Equal(got, carried) {
		t.Errorf("carried list: %q", got)
	}
	if got := find(&policy.List{File: "_lists/block.netset", Hash: policy.ContentHash(kept)}); !bytes.Equal(got, kept) {
		t.Errorf("kept list: %q", got)
	}
	if got := find(&policy.List{File: "_lists/block.netset", Hash: policy.ContentHash([]byte("other\n"))}); got != nil {
		t.Errorf("unknown list: %q", got)
	}
}
