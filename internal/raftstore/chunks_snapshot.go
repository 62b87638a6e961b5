package raftstore

import (
	"fmt"
	"slices"
)

// chunkedSnapshotFormat is the snapshot format of a state that holds
// chunks: the files of chunked generations are written once, as chunks,
// and reassembled on restore. A state without chunks is still written in
// snapshotFormat, which builds before chunks read; they refuse format 3
// rather than restoring generations without their files.
const chunkedSnapshotFormat = 3

// snapshotView returns the state to encode and its format: s itself, or,
// when s holds chunks, a shallow copy whose chunked generations carry an
// empty Files (present, so "still servable") and their chunk lists.
func snapshotView(s *State) (*State, int) {
	if len(s.Chunks) == 0 {
		return s, snapshotFormat
	}
	c := *s
	c.Generations = make(map[uint64]Generation, len(s.Generations))
	for n, g := range s.Generations {
		if g.Files != nil && len(g.Chunked) > 0 {
			g.Files = map[string][]byte{}
		}
		c.Generations[n] = g
	}
	return &c, chunkedSnapshotFormat
}

// restoreChunked rebuilds the files of the chunked generations of a
// decoded format-3 snapshot, oldest first, sharing a file's bytes with an
// older generation built from the same chunks as Stage did.
func restoreChunked(s *State) error {
	var built []Generation
	for _, n := range s.GenerationNumbers() {
		g := s.Generations[n]
		if g.Files == nil || len(g.Chunked) == 0 {
			continue
		}
		files := make(map[string][]byte, len(g.Chunked))
		for path, hashes := range g.Chunked {
			for _, h := range hashes {
				if _, ok := s.Chunks[h]; !ok {
					return fmt.Errorf("snapshot: generation %d: file %s: %w: %s", n, path, ErrMissingChunk, h)
				}
			}
			files[path] = restoredFile(s, built, path, hashes)
		}
		g.Files = files
		s.Generations[n] = g
		built = append(built, g)
	}
	return nil
}

func restoredFile(s *State, built []Generation, path string, hashes []string) []byte {
	for _, g := range built {
		if old, ok := g.Chunked[path]; ok && slices.Equal(old, hashes) {
			return g.Files[path]
		}
	}
	return concat(s, hashes)
}
