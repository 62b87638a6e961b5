package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Tree is the policies root at one revision: what a generation is made of.
type Tree struct {
	// Commit names the revision: a git commit SHA, or for a directory
	// "dir@sha256:<16 hex>" of its content.
	Commit string
	// Files maps slash-separated paths relative to the policies root to
	// their content.
	Files map[string][]byte
}

// TreeSource gives the leader loop the newest policies tree. The git
// source implements it for a repository; DirSource for a directory.
type TreeSource interface {
	Latest(ctx context.Context) (Tree, error)
}

// maxDirBytes bounds what DirSource reads into memory. It is above the
// generation limit on purpose: a tree between the two is read and then
// refused as INVALID with its size, which tells the author more than a
// read error would.
const maxDirBytes = 64 << 20

// DirSource reads the policies root from a directory (git.init_from plus
// git.path), so that editing the directory promotes a new generation. The
// revision is a digest of the content, so an unchanged directory is the
// same revision. Entries whose names start with "." (.git, editor and
// temporary files) are skipped, and only regular files are read.
type DirSource struct {
	Root string
}

var _ TreeSource = DirSource{}

// Latest implements TreeSource.
func (d DirSource) Latest(ctx context.Context) (Tree, error) {
	files := map[string][]byte{}
	total := 0
	err := filepath.WalkDir(d.Root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if path != d.Root && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(d.Root, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if total += len(rel) + len(data); total > maxDirBytes {
			return fmt.Errorf("more than %d bytes under %s", maxDirBytes, d.Root)
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		return Tree{}, fmt.Errorf("read policies directory: %w", err)
	}
	return Tree{Commit: DirCommit(files), Files: files}, nil
}

// DirCommit names a directory's content: "dir@sha256:" and the first 16
// hex digits of a SHA-256 over the sorted paths, each followed by its
// length-prefixed content.
func DirCommit(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	var n [8]byte
	for _, p := range paths {
		h.Write([]byte(p))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(n[:], uint64(len(files[p])))
		h.Write(n[:])
		h.Write(files[p])
	}
	return "dir@sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// errNoSource is returned by a loop without a source.
var errNoSource = errors.New("no policy source is configured (git.init_from is empty)")
