package raftstore

import (
	"context"
	"errors"
	"fmt"
)

// Proposer is what ProposeGeneration needs of a Store (the leader's).
type Proposer interface {
	State() *State
	Propose(ctx context.Context, p Payload) (Result, error)
}

var _ Proposer = (*Store)(nil)

// StageStats says what ProposeGeneration sent through the log.
type StageStats struct {
	// Chunked is whether the bundle went as chunks.
	Chunked bool
	// Chunks and ChunkBytes count the chunks proposed (those the state
	// did not hold already), Entries the PutChunks entries they took.
	Chunks, ChunkBytes, Entries int
}

// ProposeGeneration stages p. A bundle within MaxInlineBundleBytes goes
// as one StageGeneration of version 1, as every build before chunks wrote
// it, so an older follower keeps applying it during a rolling upgrade. A
// larger one (up to MaxGenerationBytes) is cut into content-defined chunks
// (SplitChunks); the chunks the state does not hold go in PutChunks
// entries of at most MaxChunkCommandBytes, then a version-2 Stage refers
// to every file by its chunk hashes. A node of a build before chunks
// refuses both commands, so upgrade every node before the policies root
// grows past MaxInlineBundleBytes (docs/cluster.md). Over
// MaxGenerationBytes is an error wrapping ErrTooLarge that names it.
func ProposeGeneration(ctx context.Context, s Proposer, p *StageGeneration) (Result, StageStats, error) {
	if g, ok := s.(interface{ Allows(CommandType, uint8) bool }); ok && !p.History.IsZero() &&
		!g.Allows(TypeStageGeneration, StageHistoryVersion) {
		// A 1.0.0 member refuses the fields: the history waits for the
		// upgrade, the generation does not.
		p.History = History{}
	}
	size := p.BundleSize()
	if size <= MaxInlineBundleBytes {
		res, err := s.Propose(ctx, p)
		return res, StageStats{}, err
	}
	if size > MaxGenerationBytes {
		return Result{}, StageStats{}, fmt.Errorf("%w: %w: generation %d is %d bytes of paths and contents, limit MaxGenerationBytes %d: shrink the policies root",
			ErrInvalidCommand, ErrTooLarge, p.Generation, size, MaxGenerationBytes)
	}
	chunked, chunks := splitBundle(p.Files)
	stage := *p
	stage.Files, stage.Chunked = nil, chunked
	stats, err := putChunks(ctx, s, p.Generation, chunks, s.State().Chunks)
	if err != nil {
		return Result{}, stats, err
	}
	res, err := s.Propose(ctx, &stage)
	if errors.Is(err, ErrMissingChunk) {
		// Collected between our look at the state and the Stage (a
		// concurrent activation released it): send them all once more.
		more, perr := putChunks(ctx, s, p.Generation, chunks, nil)
		stats.add(more)
		if perr != nil {
			return Result{}, stats, perr
		}
		res, err = s.Propose(ctx, &stage)
	}
	p.CreateTime = stage.CreateTime
	return res, stats, err
}

// hashedChunk is a chunk to send with its hash.
type hashedChunk struct {
	hash string
	data []byte
}

// splitBundle returns each file's chunk hashes and the distinct chunks in
// the order first seen.
func splitBundle(files map[string][]byte) (map[string][]string, []hashedChunk) {
	chunked := make(map[string][]string, len(files))
	seen := map[string]bool{}
	var chunks []hashedChunk
	for _, path := range sortedKeys(files) {
		hashes := []string{}
		for _, c := range SplitChunks(files[path]) {
			h := ChunkHash(c)
			hashes = append(hashes, h)
			if !seen[h] {
				seen[h] = true
				chunks = append(chunks, hashedChunk{hash: h, data: c})
			}
		}
		chunked[path] = hashes
	}
	return chunked, chunks
}

// putChunks proposes the chunks held does not have, in entries of at most
// MaxChunkCommandBytes.
func putChunks(ctx context.Context, s Proposer, gen uint64, chunks []hashedChunk, held map[string]Chunk) (StageStats, error) {
	stats := StageStats{Chunked: true}
	var batch [][]byte
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := s.Propose(ctx, &PutChunks{Generation: gen, Chunks: batch}); err != nil {
			return fmt.Errorf("putting chunks of generation %d: %w", gen, err)
		}
		stats.Entries++
		batch, size = nil, 0
		return nil
	}
	for _, hc := range chunks {
		if _, ok := held[hc.hash]; ok {
			continue
		}
		c := hc.data
		if size+len(c) > MaxChunkCommandBytes {
			if err := flush(); err != nil {
				return stats, err
			}
		}
		batch, size = append(batch, c), size+len(c)
		stats.Chunks++
		stats.ChunkBytes += len(c)
	}
	return stats, flush()
}

func (s *StageStats) add(o StageStats) {
	s.Chunks += o.Chunks
	s.ChunkBytes += o.ChunkBytes
	s.Entries += o.Entries
}
