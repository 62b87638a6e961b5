package experiments

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// A branch or pull request that changes a named list is previewed on
// every node: the data of each list whose content the live tree lacks
// goes through the raft log as chunks with the experiment, and nodes
// compile the experiment from them (engine.Options.FindList). A list the
// live tree holds unchanged is not sent: the live generation has it.

// liveLists are the valid lists of the live tree, by name (none when the
// tree is unknown or its lists do not load: every list is then sent).
func liveLists(tree map[string][]byte) policy.Lists {
	if tree == nil {
		return nil
	}
	lists, _ := policy.LoadLists(gitsource.FilesFS(tree))
	return lists
}

// changedListData is the data of the lists p uses that live lacks (by
// content), by content hash.
func changedListData(p *policy.Policy, live policy.Lists) map[string][]byte {
	var out map[string][]byte
	for name, l := range p.Lists {
		if l == nil || l.Data == nil {
			continue
		}
		if old := live[name]; old != nil && old.Hash == l.Hash {
			continue
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[l.Hash] = l.Data
	}
	return out
}

// carriesLists reports whether cur carries exactly the lists w would send.
func carriesLists(cur *preview.Experiment, w wantedExperiment) bool {
	return slices.Equal(slices.Sorted(maps.Keys(cur.ListChunks)), slices.Sorted(maps.Keys(w.lists)))
}

// putWithLists proposes next, with the list changes and list data of w,
// in one entry with the payloads of with (after the chunks the state
// lacks, each entry bounded by raftstore.MaxChunkCommandBytes).
func (ss *sourceSync) putWithLists(ctx context.Context, next *preview.Experiment, w wantedExperiment, with []raftstore.Payload) error {
	next.ListChanges = w.listChanges
	lists := w.lists
	if g, ok := ss.cfg.Store.(featureGate); ok && !g.Allows(raftstore.TypePutExperiment, raftstore.PutExperimentListsVersion) {
		// A member of an older release would refuse the entry: it goes
		// without its lists, and only nodes holding them preview it.
		lists = nil
	}
	stats, err := raftstore.PutExperimentWithLists(ctx, ss.cfg.Store, lists, func(refs map[string][]string) (raftstore.Payload, error) {
		next.ListChunks = refs
		p, err := experimentPut(next)
		if err != nil {
			return nil, err
		}
		return raftstore.Batch(append(slices.Clone(with), p)...)
	})
	if err != nil {
		return fmt.Errorf("storing %s: %w", next.Name, err)
	}
	if stats.Chunks > 0 {
		ss.log.Info("experiment list data sent", "experiment", next.Name, "lists", len(lists),
			"chunks", stats.Chunks, "chunk_bytes", stats.ChunkBytes, "entries", stats.Entries)
	}
	return nil
}
