package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyrollout/reconciler/internal/policy"
)

// FS returns the policies root (Config.Path) at commit hash as a read-only
// fs.FS, read from the clone as it is used. Only directories and regular
// files are visible: symbolic links and submodules are not, since a policy
// must not reach outside its tree. A file over MaxFilesSize (a list file
// over policy.MaxListFileBytes) cannot be opened. The root missing at that commit is an error matching
// fs.ErrNotExist; an unknown commit one matching ErrUnknownRevision.
func (s *Source) FS(hash string) (fs.FS, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	commit, err := s.commit(hash)
	if err != nil {
		return nil, err
	}
	root, err := s.rootTree(commit)
	if err != nil {
		return nil, err
	}
	return &treeFS{src: s, root: root, mod: commit.Committer.When}, nil
}

// commit finds a commit by its full hex hash.
func (s *Source) commit(hash string) (*object.Commit, error) {
	if !plumbing.IsHash(hash) {
		return nil, fmt.Errorf("%w: %q is not a full commit hash", ErrUnknownRevision, hash)
	}
	c, err := object.GetCommit(s.repo.Storer, plumbing.NewHash(hash))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnknownRevision, hash, err)
	}
	return c, nil
}

// rootTree is the policies root's tree in commit.
func (s *Source) rootTree(c *object.Commit) (*object.Tree, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("gitsource: tree of %s: %w", c.Hash, err)
	}
	if s.cfg.Path == "." {
		return tree, nil
	}
	sub, err := tree.Tree(s.cfg.Path)
	switch {
	case errors.Is(err, object.ErrDirectoryNotFound):
		return nil, fmt.Errorf("gitsource: git path %q at %s: %w", s.cfg.Path, c.Hash, fs.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("gitsource: git path %q at %s: %w", s.cfg.Path, c.Hash, err)
	}
	return sub, nil
}

// treeFS is an fs.FS over a git tree. Every call takes the source's
// storage lock, since objects are read lazily from the clone and the root
// tree caches lookups.
type treeFS struct {
	src  *Source
	root *object.Tree
	mod  time.Time // the commit time, so that ModTime means something
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
)

// visible reports whether an entry shows in the fs: directories and
// regular (possibly executable) files only.
func visible(m filemode.FileMode) bool {
	return m == filemode.Dir || m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

// fsMode maps a git mode to a read-only fs mode.
func fsMode(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Dir:
		return fs.ModeDir | 0o555
	case filemode.Executable:
		return 0o555
	}
	return 0o444
}

// Open opens a file or directory; its content is read at once.
func (t *treeFS) Open(name string) (fs.File, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	if name == "." {
		return t.openDir(".", t.root)
	}
	e, err := t.entry("open", name)
	if err != nil {
		return nil, err
	}
	if e.Mode == filemode.Dir {
		tree, err := object.GetTree(t.src.repo.Storer, e.Hash)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return t.openDir(name, tree)
	}
	data, err := t.readBlob(name, e.Hash)
	if err != nil {
		return nil, err
	}
	info := &fileInfo{name: path.Base(name), size: int64(len(data)), mode: fsMode(e.Mode), mod: t.mod}
	return &openFile{info: info, r: bytes.NewReader(data)}, nil
}

// ReadFile reads a whole file.
func (t *treeFS) ReadFile(name string) ([]byte, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	e, err := t.entry("read", name)
	if err != nil {
		return nil, err
	}
	if e.Mode == filemode.Dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return t.readBlob(name, e.Hash)
}

// ReadDir lists a directory, sorted by name as io/fs requires (git sorts
// directories as if their names ended in "/").
func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	tree, err := t.dirTree("readdir", name)
	if err != nil {
		return nil, err
	}
	return t.dirEntries(tree), nil
}

// Stat describes a file or directory.
func (t *treeFS) Stat(name string) (fs.FileInfo, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	if name == "." {
		return &fileInfo{name: ".", mode: fsMode(filemode.Dir), mod: t.mod}, nil
	}
	e, err := t.entry("stat", name)
	if err != nil {
		return nil, err
	}
	return t.info(path.Base(name), e.Mode, e.Hash)
}

// entry finds the visible entry at name.
func (t *treeFS) entry(op, name string) (*object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	e, err := t.root.FindEntry(name)
	if err != nil || !visible(e.Mode) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

// dirTree finds the directory at name.
func (t *treeFS) dirTree(op, name string) (*object.Tree, error) {
	if name == "." {
		return t.root, nil
	}
	e, err := t.entry(op, name)
	if err != nil {
		return nil, err
	}
	if e.Mode != filemode.Dir {
		return nil, &fs.PathError{Op: op, Path: name, Err: errors.New("not a directory")}
	}
	tree, err := object.GetTree(t.src.repo.Storer, e.Hash)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return tree, nil
}

// readBlob reads a file's content, refusing one over MaxFilesSize before
// reading it.
func (t *treeFS) readBlob(name string, h plumbing.Hash) ([]byte, error) {
	blob, err := object.GetBlob(t.src.repo.Storer, h)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	limit := int64(MaxFilesSize)
	if policy.IsListFile(name) {
		limit = policy.MaxListFileBytes
	}
	if blob.Size > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes", ErrTooLarge, blob.Size)}
	}
	data, err := t.src.blobData(blob)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}

// readAll reads a blob's content into a buffer of its size: a
// bytes.Buffer filled to its capacity grows to twice that to look for
// the end, and the blob cache held every content it kept twice over.
func readAll(b *object.Blob) ([]byte, error) {
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data := make([]byte, b.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}

// dirEntries lists the visible entries of tree, sorted by name.
func (t *treeFS) dirEntries(tree *object.Tree) []fs.DirEntry {
	out := make([]fs.DirEntry, 0, len(tree.Entries))
	for _, e := range tree.Entries {
		if visible(e.Mode) {
			out = append(out, &dirEntry{fsys: t, name: e.Name, mode: e.Mode, hash: e.Hash})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// info builds a FileInfo; a file's size needs its object's header.
func (t *treeFS) info(name string, m filemode.FileMode, h plumbing.Hash) (fs.FileInfo, error) {
	fi := &fileInfo{name: name, mode: fsMode(m), mod: t.mod}
	if m != filemode.Dir {
		size, err := t.src.repo.Storer.EncodedObjectSize(h)
		if err != nil {
			return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
		}
		fi.size = size
	}
	return fi, nil
}

func (t *treeFS) openDir(name string, tree *object.Tree) (fs.File, error) {
	info := &fileInfo{name: path.Base(name), mode: fsMode(filemode.Dir), mod: t.mod}
	return &openDir{info: info, entries: t.dirEntries(tree)}, nil
}

// fileInfo is the fs.FileInfo of a tree entry.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mod }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return nil }

// dirEntry is a tree entry as an fs.DirEntry; Info reads lazily.
type dirEntry struct {
	fsys *treeFS
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

func (d *dirEntry) Name() string      { return d.name }
func (d *dirEntry) IsDir() bool       { return d.mode == filemode.Dir }
func (d *dirEntry) Type() fs.FileMode { return fsMode(d.mode).Type() }
func (d *dirEntry) Info() (fs.FileInfo, error) {
	d.fsys.src.mu.Lock()
	defer d.fsys.src.mu.Unlock()
	return d.fsys.info(d.name, d.mode, d.hash)
}

// openFile is an open regular file, its content in memory.
type openFile struct {
	info *fileInfo
	r    *bytes.Reader
}

func (f *openFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *openFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *openFile) Close() error               { return nil }

// openDir is an open directory.
type openDir struct {
	info    *fileInfo
	entries []fs.DirEntry
	off     int
}

func (d *openDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *openDir) Close() error               { return nil }
func (d *openDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}

// ReadDir follows fs.ReadDirFile: n <= 0 reads the rest, n > 0 at most n
// entries with io.EOF at the end.
func (d *openDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.off += n
	return rest[:n], nil
}
