package raftstore

import (
	"slices"
)

// Chunked generations (issue 23): a bundle over MaxInlineBundleBytes
// travels as PutChunks entries of at most MaxChunkCommandBytes, then a
// StageGeneration of version 2 whose Chunked lists each file's chunk
// hashes. Stage reassembles the files (a copy, no compilation), so every
// reader of Generation.Files is unchanged. See DESIGN.md "Chunks".
const (
	// MaxChunkCommandBytes bounds the chunk bytes of one PutChunks, so no
	// entry of a chunked generation exceeds about 1.4 MiB encoded.
	MaxChunkCommandBytes = 1 << 20
	// maxChunkPayloadBytes leaves room for base64 and JSON framing.
	maxChunkPayloadBytes = MaxChunkCommandBytes/3*4 + 64<<10
	// MaxChunkStoreBytes bounds every chunk the state holds: the three
	// kept bundles, one released at the last activation and not yet
	// collected, and the chunks put for the next Stage.
	MaxChunkStoreBytes = 5 * MaxGenerationBytes
	// maxChunkRefs bounds the references of one Stage (about 2.7 MiB of
	// JSON): a full MaxGenerationBytes bundle of average chunks needs a
	// quarter of it.
	maxChunkRefs = 40_000
)

// Chunk is one content-addressed piece of a file, keyed by its ChunkHash
// in State.Chunks.
type Chunk struct {
	// Data is the content. Once a Stage has used the chunk it is a
	// subslice of that generation's reassembled file, so the chunk costs
	// no memory of its own.
	Data []byte `json:"data"`
	// For is the highest generation a PutChunks carried it for. A chunk
	// no kept generation refers to survives collection only while For is
	// above State.Highest: put for a Stage still to come.
	For uint64 `json:"for"`
}

// PutChunks adds chunks for the Stage of Generation, which follows it in
// the log. Apply computes each chunk's hash: the proposer cannot name a
// chunk wrongly.
type PutChunks struct {
	// Generation is the generation the chunks are for; it must be above
	// every number the state knows.
	Generation uint64 `json:"generation"`
	// Chunks are the contents, each 1 to MaxChunkBytes bytes.
	Chunks [][]byte `json:"chunks"`
}

// CommandType implements Payload.
func (PutChunks) CommandType() CommandType { return TypePutChunks }

// Validate implements Payload.
func (p PutChunks) Validate() error {
	if err := needGeneration(p.Generation); err != nil {
		return err
	}
	if len(p.Chunks) == 0 {
		return invalid("chunks are required")
	}
	total := 0
	for i, c := range p.Chunks {
		if len(c) == 0 || len(c) > MaxChunkBytes {
			return invalid("chunk %d is %d bytes, want 1 to %d", i, len(c), MaxChunkBytes)
		}
		total += len(c)
	}
	if total > MaxChunkCommandBytes {
		return invalid("chunks total %d bytes, limit %d", total, MaxChunkCommandBytes)
	}
	return nil
}

func applyPutChunks(s *State, p PutChunks) error {
	if p.Generation <= s.Highest {
		return reject(ErrGenerationNotNewer, "chunks for generation %d, not above the highest known %d",
			p.Generation, s.Highest)
	}
	held := 0
	for _, c := range s.Chunks {
		held += len(c.Data)
	}
	put := make(map[string]Chunk, len(p.Chunks))
	for _, data := range p.Chunks {
		h := ChunkHash(data)
		c, ok := s.Chunks[h]
		if !ok {
			c = Chunk{Data: data}
			held += len(data)
		}
		c.For = max(c.For, p.Generation)
		put[h] = c
	}
	if held > MaxChunkStoreBytes {
		return reject(ErrTooLarge, "chunks would hold %d bytes, limit MaxChunkStoreBytes %d: stage the chunks put so far",
			held, MaxChunkStoreBytes)
	}
	if s.Chunks == nil {
		s.Chunks = make(map[string]Chunk, len(put))
	}
	for h, c := range put {
		s.Chunks[h] = c
	}
	return nil
}

// validateChunked checks a Stage's references without state.
func validateChunked(files map[string][]byte, chunked map[string][]string) error {
	if len(files) > 0 {
		return invalid("a chunked stage carries every file as chunks, %d files inline", len(files))
	}
	refs := 0
	for path, hashes := range chunked {
		if path == "" {
			return invalid("chunked file with an empty path")
		}
		for _, h := range hashes {
			if !validChunkHash(h) {
				return invalid("file %s: chunk %q is not a chunk hash", path, clip(h))
			}
		}
		if refs += len(hashes) + 1; refs > maxChunkRefs {
			return invalid("more than %d chunk references", maxChunkRefs)
		}
	}
	return nil
}

// assemble builds the files of a chunked Stage from the chunks s holds.
// A file whose chunk list equals one in a kept generation shares that
// generation's bytes; the chunks of a new file are copied into one buffer
// and then point into it, so the copies PutChunks decoded are released.
// An error names the first missing chunk or the size over
// MaxGenerationBytes; nothing is changed then.
func assemble(s *State, gen uint64, chunked map[string][]string) (map[string][]byte, error) {
	size := 0
	for _, path := range sortedKeys(chunked) {
		size += len(path)
		for _, h := range chunked[path] {
			c, ok := s.Chunks[h]
			if !ok {
				return nil, reject(ErrMissingChunk, "generation %d: file %s: chunk %s is not held", gen, path, h)
			}
			size += len(c.Data)
		}
	}
	if size > MaxGenerationBytes {
		return nil, reject(ErrTooLarge, "generation %d is %d bytes, limit MaxGenerationBytes %d",
			gen, size, MaxGenerationBytes)
	}
	files := make(map[string][]byte, len(chunked))
	for _, path := range sortedKeys(chunked) {
		if b, ok := sharedFile(s, path, chunked[path]); ok {
			files[path] = b
			continue
		}
		files[path] = concat(s, chunked[path])
	}
	return files, nil
}

// sharedFile returns the bytes of path in a kept generation built from the
// same chunks.
func sharedFile(s *State, path string, hashes []string) ([]byte, bool) {
	for _, n := range []uint64{s.Active, s.Previous, s.Staged} {
		g, ok := s.lookup(n)
		if !ok || g.Files == nil {
			continue
		}
		if old, ok := g.Chunked[path]; ok && slices.Equal(old, hashes) {
			return g.Files[path], true
		}
	}
	return nil, false
}

// concat copies the chunks into one buffer and repoints them into it.
func concat(s *State, hashes []string) []byte {
	n := 0
	for _, h := range hashes {
		n += len(s.Chunks[h].Data)
	}
	buf := make([]byte, 0, n)
	for _, h := range hashes {
		c := s.Chunks[h]
		start := len(buf)
		buf = append(buf, c.Data...)
		c.Data = buf[start:len(buf):len(buf)]
		s.Chunks[h] = c
	}
	return buf
}

// collectChunks drops the chunks that no generation with files and no
// experiment refers to and that were not put for a Stage still to come.
// It runs after every generation lifecycle command and after an
// experiment with lists is replaced or deleted; it depends on the state
// only.
func collectChunks(s *State) {
	if len(s.Chunks) == 0 {
		return
	}
	used := map[string]bool{}
	for _, g := range s.Generations {
		if g.Files == nil {
			continue
		}
		for _, hashes := range g.Chunked {
			for _, h := range hashes {
				used[h] = true
			}
		}
	}
	for _, e := range s.Experiments {
		for _, hashes := range e.Lists {
			for _, h := range hashes {
				used[h] = true
			}
		}
	}
	for h, c := range s.Chunks {
		if !used[h] && c.For <= s.Highest {
			delete(s.Chunks, h)
		}
	}
}

// ChunkBytes is the sum of the chunk contents the state holds (most of
// them shared with the reassembled files).
func (s *State) ChunkBytes() int {
	n := 0
	for _, c := range s.Chunks {
		n += len(c.Data)
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
