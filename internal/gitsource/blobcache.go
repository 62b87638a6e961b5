package gitsource

import (
	"bytes"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Reading a tree inflates every blob in it, and a 16 MB list takes a
// tenth of a second to inflate (more on a loaded machine), at every
// commit that touches any file, and again for every branch that has it.
// The clone keeps the contents of its large blobs by hash, so a commit
// reads only the blobs it changed, and a blob a thin fetch has just
// built from a delta (the new content of a changed list) is not even
// read back (looseWriter).
const (
	// cachedBlobMin is the size from which a blob is kept: small files
	// inflate faster than they would be worth keeping.
	cachedBlobMin = 64 << 10
	// blobCacheBytes bounds the contents kept: a tree's lists at their
	// largest (policy.MaxTreeListBytes) and then some. The oldest go first.
	blobCacheBytes = 128 << 20
)

// blobCache is the kept contents, by blob hash; the Source's mu guards it.
// The contents are shared with every caller of Files and FS, which never
// write them (git objects do not change).
type blobCache struct {
	m     map[plumbing.Hash][]byte
	order []plumbing.Hash // oldest first
	size  int
}

func (c *blobCache) get(h plumbing.Hash) ([]byte, bool) {
	data, ok := c.m[h]
	return data, ok
}

// put keeps data as the content of h when it is large enough.
func (c *blobCache) put(h plumbing.Hash, data []byte) {
	if len(data) < cachedBlobMin || len(data) > blobCacheBytes/2 {
		return
	}
	if _, ok := c.m[h]; ok {
		return
	}
	if c.m == nil {
		c.m = map[plumbing.Hash][]byte{}
	}
	for c.size+len(data) > blobCacheBytes && len(c.order) > 0 {
		c.size -= len(c.m[c.order[0]])
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[h], c.size = data, c.size+len(data)
	c.order = append(c.order, h)
}

// blobData is a blob's content, from the cache or read (and kept). The
// caller holds mu.
func (s *Source) blobData(blob *object.Blob) ([]byte, error) {
	if data, ok := s.blobs.get(blob.Hash); ok {
		return data, nil
	}
	data, err := readBlob(s.repo.Storer, blob)
	if err == nil {
		s.blobs.put(blob.Hash, data)
	}
	return data, err
}

// readBlob reads a blob's content from st, the clone's storage; a large
// one through its delta chain (chainread.go), unless readChain leaves it
// to go-git. The caller holds mu.
func readBlob(st storer.EncodedObjectStorer, blob *object.Blob) ([]byte, error) {
	if blob.Size >= largeObjectBytes {
		data, ok, err := readChain(st, blob.Hash, blob.Size)
		if ok || err != nil {
			return data, err
		}
	}
	return readAll(blob)
}

// keepBuffer collects a blob's content as a fetch writes it, when the
// cache would keep it.
func keepBuffer(typ plumbing.ObjectType, size int64) *bytes.Buffer {
	if typ != plumbing.BlobObject || size < cachedBlobMin || size > blobCacheBytes/2 {
		return nil
	}
	b := new(bytes.Buffer)
	b.Grow(int(size))
	return b
}

// share replaces each kept content with one of contents holding the same
// bytes, so that only the caller's copy is held.
func (c *blobCache) share(contents map[string][]byte) {
	bySize := map[int][][]byte{}
	for _, data := range contents {
		if len(data) >= cachedBlobMin {
			bySize[len(data)] = append(bySize[len(data)], data)
		}
	}
	for h, kept := range c.m {
		for _, data := range bySize[len(kept)] {
			if &data[0] != &kept[0] && bytes.Equal(data, kept) {
				c.m[h] = data
				break
			}
		}
	}
}

// ShareBlobs keeps, of each large blob it holds, the copy in files rather
// than its own, when files has the same content. The leader reads a list
// from git, then holds it again in the generation its raft state
// assembled from the chunks it proposed: a 16 MB list twice. One
// comparison of equal-sized contents (a few milliseconds for 16 MB) per
// generation, on the node that fetched it; files must never be written.
func (s *Source) ShareBlobs(files map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs.share(files)
}
