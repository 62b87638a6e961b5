package preview

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// LogFileName is the preview log's name inside the node's data_dir.
const LogFileName = "preview.log"

// Rotation defaults for the preview log.
const (
	DefaultLogMaxBytes = 64 << 20
	DefaultLogKeep     = 5
	// DefaultLogMinFree is the free space the preview log leaves on its
	// file system: below it, lines are dropped (and counted) rather than
	// written, so that a flood of mirrored traffic cannot take the room
	// raft needs to commit (issue 16: a full disk lost a node its
	// leadership).
	DefaultLogMinFree = 256 << 20
)

// ErrLowDisk is returned by RotatingFile.Write when the file system has
// less free space than the watermark; nothing was written.
var ErrLowDisk = errors.New("preview log: free space below the watermark")

// RotatingFile is an append-only file that, before a write would take it
// past MaxBytes, renames itself to name.1 (name.1 to name.2, ... keeping
// Keep old files) and starts afresh. It is safe for concurrent use.
// Files are created 0600: the preview log holds request data and is
// never public.
type RotatingFile struct {
	path     string
	maxBytes int64
	keep     int
	// minFree is the watermark; freeSpace measures the file system
	// (statfs, or a fake in tests).
	minFree   int64
	freeSpace func(dir string) (int64, error)

	mu   sync.Mutex
	f    *os.File
	size int64
}

// OpenRotating opens (appending to) path; maxBytes <= 0 and keep < 0
// mean the defaults, keep 0 keeps no old file.
func OpenRotating(path string, maxBytes int64, keep int) (*RotatingFile, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultLogMaxBytes
	}
	if keep < 0 {
		keep = DefaultLogKeep
	}
	r := &RotatingFile{path: path, maxBytes: maxBytes, keep: keep, minFree: DefaultLogMinFree, freeSpace: freeSpace}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// OpenLog opens the preview log in dataDir with the default rotation.
func OpenLog(dataDir string) (*RotatingFile, error) {
	return OpenRotating(filepath.Join(dataDir, LogFileName), 0, -1)
}

func (r *RotatingFile) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("preview log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("preview log: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// SetMinFree changes the free-space watermark (DefaultLogMinFree); 0
// turns it off.
func (r *RotatingFile) SetMinFree(bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.minFree = bytes
}

// Write appends p, rotating first when p would not fit. A write larger
// than MaxBytes goes alone into a fresh file. Below the free-space
// watermark nothing is written and the error is ErrLowDisk. Writes come
// in batches of 64 KiB (logWriter), so measuring the file system each
// time costs one statfs per batch.
func (r *RotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, errors.New("preview log: closed")
	}
	if r.minFree > 0 {
		free, err := r.freeSpace(filepath.Dir(r.path))
		if err == nil && free-int64(len(p)) < r.minFree {
			return 0, fmt.Errorf("%w: %d bytes free, watermark %d", ErrLowDisk, free, r.minFree)
		}
	}
	if r.size > 0 && r.size+int64(len(p)) > r.maxBytes {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotate closes the file, shifts the old ones and opens a new one. When a
// rename fails the current file is reopened, so the log keeps working
// (over its size) rather than going quiet.
func (r *RotatingFile) rotate() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("preview log: %w", err)
	}
	r.f = nil
	err := r.shift()
	if oerr := r.open(); oerr != nil {
		return errors.Join(err, oerr)
	}
	return err
}

// shift moves name.i to name.i+1 (dropping name.keep) and name to name.1;
// with keep 0 it removes name.
func (r *RotatingFile) shift() error {
	if r.keep == 0 {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("preview log: %w", err)
		}
		return nil
	}
	for i := r.keep - 1; i >= 1; i-- {
		if err := os.Rename(r.old(i), r.old(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("preview log: %w", err)
		}
	}
	if err := os.Rename(r.path, r.old(1)); err != nil {
		return fmt.Errorf("preview log: %w", err)
	}
	return nil
}

func (r *RotatingFile) old(i int) string { return fmt.Sprintf("%s.%d", r.path, i) }

// Close closes the current file.
func (r *RotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
