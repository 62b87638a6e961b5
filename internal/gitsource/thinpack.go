package gitsource

import (
	"compress/zlib"
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
	objects string // the clone's objects directory
}

// fastLooseBytes is the size from which thinStorer writes an object itself:
// go-git deflates a loose object at zlib's default level, 0.4 s of CPU for
// a 16 MB list, which would take back most of what a thin pack saves.
const fastLooseBytes = 1 << 20

// SetEncodedObject stores o loose, deflated at zlib.BestSpeed when large.
func (t thinStorer) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if o.Size() < fastLooseBytes || o.Type() == plumbing.OFSDeltaObject || o.Type() == plumbing.REFDeltaObject {
		return t.Storer.SetEncodedObject(o)
	}
	h := o.Hash()
	dir := filepath.Join(t.objects, h.String()[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return plumbing.ZeroHash, err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if err := writeLoose(f, o); err != nil {
		_ = f.Close()
		return plumbing.ZeroHash, fmt.Errorf("gitsource: writing object %s: %w", h, err)
	}
	if err := f.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return h, os.Rename(f.Name(), filepath.Join(dir, h.String()[2:]))
}

// writeLoose writes o in git's loose format: "<type> <size>\x00<content>",
// deflated.
func writeLoose(w io.Writer, o plumbing.EncodedObject) error {
	zw, err := zlib.NewWriterLevel(w, zlib.BestSpeed)
	if err != nil {
		return err
	}
	r, err := o.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := fmt.Fprintf(zw, "%s %d\x00", o.Type(), o.Size()); err != nil {
		return err
	}
	if _, err := io.Copy(zw, r); err != nil {
		return err
	}
	return zw.Close()
}
