package gitsource

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// In the pack housekeeping writes, each version of a list but the largest
// is a delta on a neighbour, in chains of up to 50. go-git resolves a
// chain in memory, one whole version per link, growing each by appends
// and putting each in its object cache: the version at the end of a chain
// of 20 of a 16 MB list allocated 1.1 GB and peaked at 527 MB of heap.
// That version is main's for a list that shrinks over time, read first
// after every restart. readChain walks the chain itself instead and
// applies its deltas, oldest base first, into two buffers of the exact
// sizes: about three copies of the file allocated, one kept.
const (
	// maxChainLinks bounds the walk: go-git's encoder writes chains of
	// at most 50, git's of at most 50 by default too; a longer one (or
	// a loop in a damaged pack) is left to go-git.
	maxChainLinks = 64
	// minChainLimit is the least size of a version inside a chain that
	// readChain builds; past it, and past chainSizeFactor times the
	// version asked for, go-git reads the blob as it would anyway.
	minChainLimit   = 64 << 20
	chainSizeFactor = 4
)

// errInvalidDelta is a delta that does not apply to its base: a damaged
// pack.
var errInvalidDelta = errors.New("invalid delta in the clone's pack")

// errDamagedObject is a chain that applied but built other content than
// the object's hash names: a damaged pack.
var errDamagedObject = errors.New("an object of the clone's pack does not match its hash (the pack is damaged; remove the node's clone to fetch it again)")

// readChain reads the content of the blob h, of size bytes, by applying
// its delta chain. ok is false when it did not (the storage cannot list
// deltas, or the chain is too long or holds too large a version): the
// caller reads the blob through go-git then. The caller holds mu.
func readChain(st storer.EncodedObjectStorer, h plumbing.Hash, size int64) (data []byte, ok bool, err error) {
	ds, isDelta := st.(deltaStorer)
	if !isDelta {
		return nil, false, nil
	}
	return readDeltas(ds, h, size)
}

// deltaStorer is the clone's storage as readDeltas reads it: an object as
// it is stored, a delta on its base or whole (storer.DeltaObjectStorer).
type deltaStorer interface {
	DeltaObject(plumbing.ObjectType, plumbing.Hash) (plumbing.EncodedObject, error)
}

// readDeltas is readChain on a storage that lists deltas.
func readDeltas(ds deltaStorer, h plumbing.Hash, size int64) (data []byte, ok bool, err error) {
	limit := max(chainSizeFactor*size, minChainLimit)
	var deltas [][]byte  // the chain's deltas, the one that gives h first
	var deltaBytes int64 // what they hold, bounded by limit too
	var base plumbing.EncodedObject
	for cur := h; base == nil; {
		if len(deltas) > maxChainLinks {
			return nil, false, nil
		}
		o, err := ds.DeltaObject(plumbing.AnyObject, cur)
		if err != nil {
			return nil, false, fmt.Errorf("gitsource: reading object %s: %w", cur, err)
		}
		d, isDelta := o.(plumbing.DeltaObject)
		if !isDelta {
			base = o
			break
		}
		if deltaBytes += o.Size(); deltaBytes > limit {
			return nil, false, nil
		}
		delta, err := readExact(o, o.Size())
		if err != nil {
			return nil, false, fmt.Errorf("gitsource: reading a delta of %s: %w", h, err)
		}
		deltas, cur = append(deltas, delta), d.BaseHash()
	}
	if base.Type() != plumbing.BlobObject || base.Size() > limit {
		return nil, false, nil
	}
	data, ok, err = applyChain(base, deltas, size, limit)
	// The content is checked against its name (about 25 ms for 16 MB):
	// a damaged pack must not become a policy tree nobody committed.
	if ok && plumbing.ComputeHash(plumbing.BlobObject, data) != h {
		return nil, false, fmt.Errorf("gitsource: reading %s: %w", h, errDamagedObject)
	}
	return data, ok, err
}

// applyChain applies deltas, the last first, to base's content. Each
// version but the last is built in the buffer the one before it left,
// when large enough; the last gets a buffer of its own, of its size, as
// the blob cache keeps it.
func applyChain(base plumbing.EncodedObject, deltas [][]byte, size, limit int64) ([]byte, bool, error) {
	src, err := readExact(base, base.Size())
	if err != nil {
		return nil, false, fmt.Errorf("gitsource: reading %s: %w", base.Hash(), err)
	}
	var spare []byte
	for i := len(deltas) - 1; i >= 0; i-- {
		srcSize, dstSize, ops, err := deltaHeader(deltas[i])
		if err != nil {
			return nil, false, err
		}
		if srcSize != uint64(len(src)) {
			return nil, false, fmt.Errorf("%w: base of %d bytes, delta for %d", errInvalidDelta, len(src), srcSize)
		}
		if dstSize > uint64(limit) || (i == 0 && dstSize != uint64(size)) {
			return nil, false, nil
		}
		var dst []byte
		if i > 0 && uint64(cap(spare)) >= dstSize {
			dst = spare[:dstSize]
		} else {
			dst = make([]byte, dstSize)
		}
		if err := patch(dst, src, ops); err != nil {
			return nil, false, err
		}
		spare, src = src, dst
	}
	if int64(len(src)) != size {
		return nil, false, nil
	}
	return src, true, nil
}

// readExact reads the n bytes of o's content.
func readExact(o plumbing.EncodedObject, n int64) ([]byte, error) {
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}

// deltaHeader splits a git delta into the sizes of its base and result
// (little-endian base-128 varints) and its instructions.
func deltaHeader(delta []byte) (srcSize, dstSize uint64, ops []byte, err error) {
	srcSize, n := binary.Uvarint(delta)
	if n <= 0 {
		return 0, 0, nil, errInvalidDelta
	}
	dstSize, m := binary.Uvarint(delta[n:])
	if m <= 0 {
		return 0, 0, nil, errInvalidDelta
	}
	return srcSize, dstSize, delta[n+m:], nil
}

// patch fills dst, exactly, with the instructions ops applied to src:
// copies of a range of src (offset and size in the bytes the opcode's
// low bits select) and inserts of the bytes that follow the opcode.
func patch(dst, src, ops []byte) error {
	pos := 0
	for i := 0; i < len(ops); {
		op := ops[i]
		i++
		switch {
		case op&0x80 != 0:
			var off, n int
			for b := range 7 {
				if op&(1<<b) == 0 {
					continue
				}
				if i >= len(ops) {
					return errInvalidDelta
				}
				if b < 4 {
					off |= int(ops[i]) << (8 * b)
				} else {
					n |= int(ops[i]) << (8 * (b - 4))
				}
				i++
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > len(src) || pos+n > len(dst) {
				return errInvalidDelta
			}
			pos += copy(dst[pos:], src[off:off+n])
		case op != 0:
			n := int(op)
			if i+n > len(ops) || pos+n > len(dst) {
				return errInvalidDelta
			}
			pos += copy(dst[pos:], ops[i:i+n])
			i += n
		default:
			return errInvalidDelta
		}
	}
	if pos != len(dst) {
		return errInvalidDelta
	}
	return nil
}

// EncodedObject is the storage's, but a large blob comes whole, from the
// blob cache or readChain: go-git's pack parser reads each base a thin
// pack's deltas name through it, and the base of a pushed list is main's
// version, at the end of a chain when the list shrinks (54 times the
// file allocated by one fetch after a restart, without this).
func (t *thinStorer) EncodedObject(typ plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := t.Storer.EncodedObject(typ, h)
	if err != nil || o.Type() != plumbing.BlobObject || o.Size() < largeObjectBytes {
		return o, err
	}
	if data, ok := t.blobs.get(h); ok {
		return &wholeBlob{hash: h, data: data}, nil
	}
	data, ok, err := readChain(t.Storer, h, o.Size())
	if err != nil || !ok {
		return o, err
	}
	return &wholeBlob{hash: h, data: data}, nil
}

// wholeBlob is a blob held in memory, read-only: its content may be the
// blob cache's.
type wholeBlob struct {
	hash plumbing.Hash
	data []byte
}

var _ plumbing.EncodedObject = (*wholeBlob)(nil)

func (b *wholeBlob) Hash() plumbing.Hash         { return b.hash }
func (b *wholeBlob) Type() plumbing.ObjectType   { return plumbing.BlobObject }
func (b *wholeBlob) SetType(plumbing.ObjectType) {}
func (b *wholeBlob) Size() int64                 { return int64(len(b.data)) }
func (b *wholeBlob) SetSize(int64)               {}
func (b *wholeBlob) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.data)), nil
}
func (b *wholeBlob) Writer() (io.WriteCloser, error) {
	return nil, errors.New("gitsource: a blob read from the clone is not written")
}

// smallObjects is go-git's object cache without its large objects: go-git
// puts there every version it builds resolving a delta chain (what
// readChain leaves to it), and its default 96 MiB held them after the
// read, six versions of a 16 MB list for as long as the Source lives.
// Trees, commits and small files, what the cache saves reads of, stay.
type smallObjects struct{ cache.Object }

var _ cache.Object = smallObjects{}

func (c smallObjects) Put(o plumbing.EncodedObject) {
	if o.Size() < largeObjectBytes {
		c.Object.Put(o)
	}
}
