package raftstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"
)

func listHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// putListExperiment stores experiment name with lists through
// PutExperimentWithLists.
func putListExperiment(ctx context.Context, t *testing.T, prop Proposer, name string, lists map[string][]byte) StageStats {
	t.Helper()
	stats, err := PutExperimentWithLists(ctx, prop, lists, func(refs map[string][]string) (Payload, error) {
		return &PutExperiment{Name: name, Data: []byte(`{}`), Lists: refs}, nil
	})
	if err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	return stats
}

// TestClusterExperimentListReachesEveryNode: an experiment's changed list
// travels as chunks to every node (only the chunks the live generation
// lacks: a one-line change sends under 1% of the list), survives the
// promotion of a generation that does not use it, and is collected once
// the experiment is deleted.
func TestClusterExperimentListReachesEveryNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	list := netset(11, 600_000) // over MaxInlineBundleBytes: the live generation is chunked
	prop := &countingProposer{c: c}
	promoteChunked(ctx, t, c, prop, 1, bigFiles(list))

	changed := changeLine(list)
	hash := listHash(changed)
	prop.bytes, prop.count = 0, 0
	stats := putListExperiment(ctx, t, prop, "policies/web/experiments/pr-1", map[string][]byte{hash: changed})
	t.Logf("experiment with a one-line change to a %d byte list: %d bytes in %d entries (%.3f%%), %d chunks",
		len(list), prop.bytes, prop.count, 100*float64(prop.bytes)/float64(len(list)), stats.Chunks)
	if prop.bytes*100 > len(list) || stats.Chunks == 0 {
		t.Fatalf("the experiment's list replicated %d bytes (%+v), want 0 < chunks, bytes <= 1%% of %d", prop.bytes, stats, len(list))
	}
	hasList := func(want bool) {
		t.Helper()
		for _, s := range c.stores {
			eventually(t, time.Minute, s.ID()+" holding the experiment's list: "+fmt.Sprint(want), func() bool {
				st := s.State()
				refs := st.Experiments["policies/web/experiments/pr-1"].Lists[hash]
				data, ok := st.ListData(refs)
				if want {
					return ok && bytes.Equal(data, changed)
				}
				return len(refs) == 0 && len(st.Chunks) == len(uniqueChunks(st))
			})
		}
	}
	hasList(true)
	promoteChunked(ctx, t, c, prop, 2, map[string][]byte{"web/policy.toml": []byte("default_action = \"allow\"\n")})
	hasList(true)
	c.propose(&DeleteExperiment{Name: "policies/web/experiments/pr-1"})
	hasList(false)
}

// uniqueChunks are the chunks the kept generations of st use.
func uniqueChunks(st *State) map[string]bool {
	used := map[string]bool{}
	for _, g := range st.Generations {
		if g.Files == nil {
			continue
		}
		for _, hs := range g.Chunked {
			for _, h := range hs {
				used[h] = true
			}
		}
	}
	return used
}

// A version 1 entry cannot carry lists, and an experiment naming a chunk
// the state lacks is refused on every node alike.
func TestFSMExperimentListsChecked(t *testing.T) {
	h := newHarness(t, false)
	data := []byte("10.0.0.0/8\n")
	refs := map[string][]string{listHash(data): {ChunkHash(data)}}
	put := &PutExperiment{Name: "policies/web/experiments/pr-1", Data: []byte(`{}`), Lists: refs}
	if err := h.apply(put); !errors.Is(err, ErrMissingChunk) {
		t.Fatalf("missing chunk: %v", err)
	}
	cmd := mustCmd(t, put)
	cmd.Version = 1
	if err := h.applyCmd(cmd); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("version 1 with lists: %v", err)
	}
	h.mustApply(&PutChunks{Generation: 1, Chunks: [][]byte{data}})
	h.mustApply(put)
	if got, ok := h.fsm.State().ListData(refs[listHash(data)]); !ok || !bytes.Equal(got, data) {
		t.Fatalf("list data %q %v", got, ok)
	}
	if v := mustCmd(t, &PutExperiment{Name: put.Name, Data: []byte(`{}`)}).Version; v != 1 {
		t.Fatalf("an experiment without lists is written at version %d", v)
	}
}
