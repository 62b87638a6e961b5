package raftstore

import (
	"context"
	"errors"
	"fmt"
)

// Experiment lists (issue 23): a branch or pull request that changes a
// named list is previewed on every node, so the list's data travels like
// a chunked generation's files: PutChunks, then a PutExperiment of version
// 2 whose Lists name each changed list's chunks by the list's content
// hash. Nodes reassemble a list when they compile the experiment (outside
// Apply); a chunk is collected once no experiment and no kept generation
// refers to it. A list unchanged from the live tree is not sent: the live
// generation has it.

// validateListRefs checks an experiment's list references without state.
func validateListRefs(lists map[string][]string) error {
	refs := 0
	for hash, chunks := range lists {
		if !validChunkHash(hash) {
			return invalid("list %q is not a content hash", clip(hash))
		}
		if len(chunks) == 0 {
			return invalid("list %.16s has no chunks", hash)
		}
		for _, h := range chunks {
			if !validChunkHash(h) {
				return invalid("list %.16s: chunk %q is not a chunk hash", hash, clip(h))
			}
		}
		if refs += len(chunks) + 1; refs > maxChunkRefs {
			return invalid("more than %d chunk references", maxChunkRefs)
		}
	}
	return nil
}

// heldListChunks checks that s holds every chunk of lists and that they
// total at most MaxGenerationBytes: what one tree's lists may hold.
func heldListChunks(s *State, name string, lists map[string][]string) error {
	size := 0
	for _, hash := range sortedKeys(lists) {
		for _, h := range lists[hash] {
			c, ok := s.Chunks[h]
			if !ok {
				return reject(ErrMissingChunk, "experiment %s: list %.16s: chunk %s is not held", name, hash, h)
			}
			size += len(c.Data)
		}
	}
	if size > MaxGenerationBytes {
		return reject(ErrTooLarge, "experiment %s: lists of %d bytes, limit MaxGenerationBytes %d", name, size, MaxGenerationBytes)
	}
	return nil
}

// ListData reassembles an experiment's list from the chunks s holds; ok
// is false when s lacks one. The caller checks the content hash.
func (s *State) ListData(chunks []string) ([]byte, bool) {
	n := 0
	for _, h := range chunks {
		c, ok := s.Chunks[h]
		if !ok {
			return nil, false
		}
		n += len(c.Data)
	}
	buf := make([]byte, 0, n)
	for _, h := range chunks {
		buf = append(buf, s.Chunks[h].Data...)
	}
	return buf, true
}

// ProposeExperimentLists puts the chunks of lists (content hash -> data)
// that the state lacks, and returns each list's chunk hashes for
// PutExperiment.Lists, with what was sent. The chunks are put for the
// next generation number, so they survive until a Stage that follows
// before the experiment refers to them: put returns ErrMissingChunk then,
// and the caller puts them again (PutExperimentWithLists does).
func ProposeExperimentLists(ctx context.Context, s Proposer, lists map[string][]byte, resend bool) (map[string][]string, StageStats, error) {
	if len(lists) == 0 {
		return nil, StageStats{}, nil
	}
	refs, chunks := splitBundle(lists)
	st := s.State()
	held := st.Chunks
	if resend {
		held = nil
	}
	stats, err := putChunks(ctx, s, st.Highest+1, chunks, held)
	if err != nil {
		return nil, stats, fmt.Errorf("putting the chunks of an experiment's lists: %w", err)
	}
	return refs, stats, nil
}

// PutExperimentWithLists proposes put (built by the caller, a Txn or a
// PutExperiment) after the chunks of lists, retrying once with every
// chunk when a Stage collected some in between. put receives the
// lists' chunk hashes to carry.
func PutExperimentWithLists(ctx context.Context, s Proposer, lists map[string][]byte,
	put func(refs map[string][]string) (Payload, error)) (StageStats, error) {
	var total StageStats
	for _, resend := range []bool{false, true} {
		refs, stats, err := ProposeExperimentLists(ctx, s, lists, resend)
		total.add(stats)
		if err != nil {
			return total, err
		}
		p, err := put(refs)
		if err != nil {
			return total, err
		}
		if _, err = s.Propose(ctx, p); !errors.Is(err, ErrMissingChunk) || resend {
			return total, err
		}
	}
	return total, nil
}
