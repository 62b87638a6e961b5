package raftstore

import (
	"crypto/sha256"
	"encoding/hex"
)

// Content-defined chunking of generation files (issue 23). Only the leader
// splits files; followers store chunks by the hash Apply computes, so the
// cut points may change between builds at the cost of deduplication only.
//
// A gear hash rolls over the bytes (each byte's influence leaves the top
// bits after 64 bytes); when its top chunkMaskBits bits are zero, the
// chunk ends after the next newline. An inserted or changed line therefore
// moves the cut points of the chunk it lands in (and rarely the next one)
// and no others, so a one-line change to a 16 MB list replicates one or two
// chunks, about chunkAvgBytes each.
const (
	// chunkMinBytes is the smallest chunk, except a file's last one.
	chunkMinBytes = 8 << 10
	// chunkMaskBits sets the average distance between hash hits past the
	// minimum: 2^14 bytes, so chunks average about 24 KiB. Smaller chunks
	// cost more references in the Stage command (67 bytes each), larger
	// ones more bytes per change; about 24 KiB minimises the sum for a
	// one-line change to a 16 MB file (~0.5% of it).
	chunkMaskBits = 14
	// MaxChunkBytes is the largest chunk: a file without a newline for
	// that long is cut anyway.
	MaxChunkBytes = 128 << 10
)

// gearTable maps a byte to a pseudo-random 64-bit value, fixed by a
// splitmix64 sequence so that every build cuts the same way.
var gearTable = func() (t [256]uint64) {
	x := uint64(0x6a09e667f3bcc909)
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		t[i] = z ^ (z >> 31)
	}
	return t
}()

// SplitChunks cuts data into content-defined chunks at line boundaries,
// each at most MaxChunkBytes. The chunks are subslices of data; empty data
// has no chunks.
func SplitChunks(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := cutPoint(data)
		out = append(out, data[:n:n])
		data = data[n:]
	}
	return out
}

// cutPoint returns the length of the first chunk of data.
func cutPoint(data []byte) int {
	const mask = uint64(1<<chunkMaskBits-1) << (64 - chunkMaskBits)
	if len(data) <= chunkMinBytes {
		return len(data)
	}
	var h uint64
	armed := false
	lastNewline := -1
	limit := min(len(data), MaxChunkBytes)
	for i := 0; i < limit; i++ {
		b := data[i]
		h = h<<1 + gearTable[b]
		if i < chunkMinBytes {
			continue
		}
		if b == '\n' {
			if armed {
				return i + 1
			}
			lastNewline = i
		}
		if h&mask == 0 {
			armed = true
		}
	}
	if limit == len(data) {
		return limit
	}
	if lastNewline >= 0 {
		return lastNewline + 1 // at the limit: keep lines whole when we can
	}
	return limit
}

// ChunkHash is the content address of a chunk: its SHA-256, lower-case hex.
func ChunkHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// validChunkHash reports whether h looks like a ChunkHash.
func validChunkHash(h string) bool {
	if len(h) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
