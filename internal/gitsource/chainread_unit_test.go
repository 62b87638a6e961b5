package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"

	"github.com/policyrollout/reconciler/internal/listgen"
)

// chainStore is a storage of whole objects and deltas, as a pack holds
// them.
type chainStore map[plumbing.Hash]plumbing.EncodedObject

func (c chainStore) DeltaObject(_ plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if o, ok := c[h]; ok {
		return o, nil
	}
	return nil, plumbing.ErrObjectNotFound
}

// add stores content as an object of typ, whole when base is nil, else
// as a delta on it; it returns the object's hash.
func (c chainStore) add(typ plumbing.ObjectType, content, base []byte) plumbing.Hash {
	h := plumbing.ComputeHash(typ, content)
	if base == nil {
		o := &plumbing.MemoryObject{}
		o.SetType(typ)
		o.Write(content)
		c[h] = o
		return h
	}
	d := &chainDelta{MemoryObject: &plumbing.MemoryObject{}, base: plumbing.ComputeHash(typ, base), hash: h}
	d.SetType(plumbing.OFSDeltaObject)
	d.Write(packfile.DiffDelta(base, content))
	c[h] = d
	return h
}

// chainDelta is a delta object, as the storage returns one.
type chainDelta struct {
	*plumbing.MemoryObject
	base, hash plumbing.Hash
}

func (d *chainDelta) BaseHash() plumbing.Hash   { return d.base }
func (d *chainDelta) ActualHash() plumbing.Hash { return d.hash }
func (d *chainDelta) ActualSize() int64         { return 0 }

// versions are n versions of a list, each one line longer than the last.
func versions(n int) [][]byte {
	out := [][]byte{[]byte(listgen.Dense{Seed: 23, V6Every: 4}.Text(20_000))}
	for i := 1; i < n; i++ {
		out = append(out, fmt.Appendf(bytes.Clone(out[i-1]), "192.0.2.%d/32\n", i))
	}
	return out
}

// chain stores vs as a chain: the first whole, each next a delta on it.
func chain(c chainStore, typ plumbing.ObjectType, vs [][]byte) plumbing.Hash {
	var h plumbing.Hash
	for i, v := range vs {
		var base []byte
		if i > 0 {
			base = vs[i-1]
		}
		h = c.add(typ, v, base)
	}
	return h
}

func TestReadDeltasAppliesAChain(t *testing.T) {
	t.Parallel()
	vs := versions(6)
	c := chainStore{}
	chain(c, plumbing.BlobObject, vs)
	for i, v := range vs {
		data, ok, err := readDeltas(c, plumbing.ComputeHash(plumbing.BlobObject, v), int64(len(v)))
		if err != nil || !ok || !bytes.Equal(data, v) {
			t.Fatalf("version %d: ok %v, err %v, equal %v", i, ok, err, bytes.Equal(data, v))
		}
		if cap(data) != len(v) {
			t.Errorf("version %d: %d bytes in a buffer of %d", i, len(data), cap(data))
		}
	}
}

// What readDeltas does not read is left to go-git (ok false, no error):
// a chain too long, a version or deltas too large, a base that is not a
// blob; a delta that does not apply is an error.
func TestReadDeltasLeavesToGoGitWhatItDoesNotRead(t *testing.T) {
	t.Parallel()
	long := chainStore{}
	longVs := make([][]byte, maxChainLinks+2)
	for i := range longVs {
		longVs[i] = fmt.Appendf(nil, "%s%d\n", bytes.Repeat([]byte("x"), 100), i)
	}
	longHead := chain(long, plumbing.BlobObject, longVs)

	huge := chainStore{}
	hugeBase := &plumbing.MemoryObject{}
	hugeBase.SetType(plumbing.BlobObject)
	hugeBase.Write([]byte("small\n"))
	hugeBase.SetSize(1 << 40) // what its header says
	huge[plumbing.ComputeHash(plumbing.BlobObject, []byte("small\n"))] = hugeBase
	hugeHead := huge.add(plumbing.BlobObject, []byte("small\nlist\n"), []byte("small\n"))

	vs := versions(3)
	bulky := chainStore{}
	bulkyHead := chain(bulky, plumbing.BlobObject, vs)
	bulky[bulkyHead].SetSize(1 << 40) // a delta its header says is that large

	trees := chainStore{}
	treeHead := chain(trees, plumbing.TreeObject, vs)

	damaged := chainStore{}
	damagedHead := chain(damaged, plumbing.BlobObject, vs)
	wrong := damaged.add(plumbing.BlobObject, append(bytes.Clone(vs[1]), '!'), nil)
	damaged[plumbing.ComputeHash(plumbing.BlobObject, vs[1])] = damaged[wrong] // the base of vs[2]'s delta

	for _, c := range []struct {
		name  string
		store chainStore
		head  plumbing.Hash
		size  int
		err   error
	}{
		{"chain too long", long, longHead, len(longVs[len(longVs)-1]), nil},
		{"base too large", huge, hugeHead, len("small\nlist\n"), nil},
		{"delta too large", bulky, bulkyHead, len(vs[2]), nil},
		{"not a blob", trees, treeHead, len(vs[2]), nil},
		{"missing base", chainStore{damagedHead: damaged[damagedHead]}, damagedHead, len(vs[2]), plumbing.ErrObjectNotFound},
	} {
		data, ok, err := readDeltas(c.store, c.head, int64(c.size))
		if ok || data != nil || !errors.Is(err, c.err) {
			t.Errorf("%s: ok %v, %d bytes, err %v; want not read, err %v", c.name, ok, len(data), err, c.err)
		}
	}
	if _, _, err := readDeltas(damaged, damagedHead, int64(len(vs[2]))); !errors.Is(err, errInvalidDelta) {
		t.Errorf("a delta on a base of another size: %v, want %v", err, errInvalidDelta)
	}
}

// patch builds exactly what go-git's delta encoder encoded, and never
// panics or writes out of bounds on a damaged delta.
func FuzzPatch(f *testing.F) {
	f.Add([]byte(listgen.Dense{Seed: 23, V6Every: 4}.Text(200)), []byte(listgen.Dense{Seed: 23, V6Every: 4}.Text(210)), uint16(7), byte(0x91))
	f.Add([]byte("a\nb\nc\n"), []byte("a\nc\n"), uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, src, dst []byte, at uint16, flip byte) {
		if len(src) == 0 {
			return
		}
		delta := packfile.DiffDelta(src, dst)
		if err := applyOne(delta, src, dst); err != nil {
			t.Fatalf("a delta go-git encoded: %v", err)
		}
		damaged := bytes.Clone(delta)
		damaged[int(at)%len(damaged)] ^= flip
		_, size, ops, err := deltaHeader(damaged)
		if err != nil || size > 1<<20 {
			return
		}
		_ = patch(make([]byte, size), src, ops)
	})
}

// applyOne applies delta to src and checks it gives want.
func applyOne(delta, src, want []byte) error {
	srcSize, size, ops, err := deltaHeader(delta)
	if err != nil {
		return err
	}
	if srcSize != uint64(len(src)) || size != uint64(len(want)) {
		return fmt.Errorf("header %d -> %d, want %d -> %d", srcSize, size, len(src), len(want))
	}
	got := make([]byte, size)
	if err := patch(got, src, ops); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errors.New("the result differs")
	}
	return nil
}

// A chain whose base was damaged but kept its size gives other content
// than its hash names: the reader refuses it instead of serving a policy
// tree nobody committed (go-git does not check either).
func TestReadDeltasChecksTheContentsHash(t *testing.T) {
	t.Parallel()
	vs := versions(4)
	c := chainStore{}
	h := chain(c, plumbing.BlobObject, vs)
	baseHash := plumbing.ComputeHash(plumbing.BlobObject, vs[0])
	damaged := bytes.Clone(vs[0])
	damaged[0] ^= 0x01 // the same size; the deltas still apply
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	o.Write(damaged)
	c[baseHash] = o
	_, _, err := readDeltas(c, h, int64(len(vs[3])))
	if !errors.Is(err, errDamagedObject) {
		t.Fatalf("a damaged base: %v, want errDamagedObject", err)
	}
}
