package gitsource

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"
)

// go-git's clients do not ask for thin packs (transport.UnsupportedCapabilities):
// its on-disk pack writer indexes a fetched pack on its own, and a thin pack's
// deltas name bases outside it. Without them a server sends a changed file
// whole, deflated anew: for a one-line change to a 16 MB list, `git
// pack-objects` spent 1.4 s of CPU making a 4.7 MB pack where the thin one,
// a delta against the blob the clone has, was 592 bytes in 0.18 s
// (docs/performance.md). thinStorer lets go-git resolve such bases, so the
// capability is asked for. This is the only user of go-git's transports in
// the process.
func init() {
	transport.UnsupportedCapabilities = slices.DeleteFunc(slices.Clone(transport.UnsupportedCapabilities),
		func(c capability.Capability) bool { return c == capability.ThinPack })
}

// thinStorer is the clone's storage without its PackfileWriter: go-git then
// parses a fetched pack against the storage, which resolves a thin pack's
// deltas on objects the clone holds, and stores each object it receives
// loose. Only fetches into a clone that has refs use it (a first fetch
// sends no haves, so its pack is never thin and goes whole to disk).
type thinStorer struct {
	storage.Storer
	objects string     // the clone's objects directory
	blobs   *blobCache // the Source's, which the fetch's caller locked
	// last is the object LazyWriter gave last. go-git's parser closes
	// them all when the pack ends, so a pack of many objects would hold
	// as many open files; it writes each whole before asking for the
	// next, so the next LazyWriter closes the last.
	last *looseWriter
}

// SetEncodedObject stores o loose (the objects a thin pack's deltas
// resolve to).
func (t *thinStorer) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if o.Type() == plumbing.OFSDeltaObject || o.Type() == plumbing.REFDeltaObject {
		return t.Storer.SetEncodedObject(o) // refused there, as go-git refuses it
	}
	w, header, err := t.LazyWriter()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	lw := w.(*looseWriter)
	defer lw.discard()
	r, err := o.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer r.Close()
	if err := header(o.Type(), o.Size()); err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := io.Copy(lw, r); err != nil {
		return plumbing.ZeroHash, err
	}
	return lw.hasher.Sum(), lw.Close()
}

// LazyWriter is what go-git's pack parser streams an object that is not a
// delta into (an object of any size is never held in memory): a loose
// object deflated at zlib.BestSpeed. go-git's own writes at the default
// level, 0.4 s of CPU for a 16 MB list, which would take back most of
// what a thin pack saves.
func (t *thinStorer) LazyWriter() (io.WriteCloser, func(plumbing.ObjectType, int64) error, error) {
	if t.last != nil {
		if err := t.last.Close(); err != nil {
			return nil, nil, fmt.Errorf("gitsource: writing an object: %w", err)
		}
	}
	f, err := os.CreateTemp(t.objects, "tmp_obj_")
	if err != nil {
		return nil, nil, fmt.Errorf("gitsource: writing an object: %w", err)
	}
	t.last = &looseWriter{f: f, objects: t.objects, blobs: t.blobs}
	return t.last, t.last.header, nil
}

// looseWriter writes one loose object: "<type> <size>\x00<content>",
// deflated, renamed to its hash when closed.
type looseWriter struct {
	f       *os.File
	objects string
	zw      *zlib.Writer
	hasher  plumbing.Hasher
	closed  bool
	// keep collects a large blob's content for blobs, so that reading the
	// tree does not inflate what the fetch has just deflated.
	blobs *blobCache
	keep  *bytes.Buffer
	// size is the header's, written what came: an object cut short (a
	// fetch that failed in it) is dropped, never renamed.
	size, written int64
}

func (w *looseWriter) header(typ plumbing.ObjectType, size int64) error {
	zw, err := zlib.NewWriterLevel(w.f, zlib.BestSpeed)
	if err != nil {
		return err
	}
	w.zw, w.hasher, w.keep, w.size = zw, plumbing.NewHasher(typ, size), keepBuffer(typ, size), size
	_, err = fmt.Fprintf(zw, "%s %d\x00", typ, size)
	return err
}

func (w *looseWriter) Write(p []byte) (int, error) {
	if w.zw == nil {
		return 0, errors.New("gitsource: object written before its header")
	}
	w.hasher.Write(p)
	w.written += int64(len(p))
	if w.keep != nil {
		w.keep.Write(p)
	}
	return w.zw.Write(p)
}

// Close finishes the object and moves it where git looks for it.
func (w *looseWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	defer w.discard()
	if w.zw == nil {
		return errors.New("gitsource: object closed before its header")
	}
	if w.written != w.size {
		return fmt.Errorf("gitsource: object of %d bytes cut short at %d", w.size, w.written)
	}
	if err := w.zw.Close(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	h := w.hasher.Sum().String()
	dir := filepath.Join(w.objects, h[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Rename(w.f.Name(), filepath.Join(dir, h[2:])); err != nil {
		return err
	}
	if w.keep != nil && w.blobs != nil {
		w.blobs.put(w.hasher.Sum(), w.keep.Bytes())
	}
	return nil
}

// discard removes the temporary file unless it became the object.
func (w *looseWriter) discard() {
	_ = w.f.Close()
	_ = os.Remove(w.f.Name()) // a no-op once renamed
}
