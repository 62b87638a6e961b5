package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"testing/fstest"
)

// Budgets of a policies root (a generation's tree, or a branch's), checked
// before anything in it is parsed. gitsource reads git trees and ReadTree
// directories under the same caps, so a tree is refused for the same
// reason wherever it comes from.
const (
	// MaxTreeBytes bounds a policies root: file contents plus path names.
	// A generation carries the tree through the raft log and every node
	// keeps it in memory.
	MaxTreeBytes = 8 << 20

	// MaxTreeFiles bounds how many regular files a policies root holds,
	// counting those that are not policies.
	MaxTreeFiles = 10_000

	// MaxTreeRules is the most rules all the policies of a tree may have
	// together (MaxPolicyRules bounds one policy). Every node compiles all
	// of them for a generation.
	MaxTreeRules = 10_000

	// MaxTreeDecodeBytes bounds the bytes Load decodes in one tree. An
	// included file is decoded once per policy that includes it, so a
	// tree within MaxTreeBytes could otherwise make the parser read the
	// same megabyte thousands of times.
	MaxTreeDecodeBytes = 2 * MaxTreeBytes
)

// loadBudget counts what one Load has decoded and merged, against the
// tree budgets.
type loadBudget struct {
	decoded int
	rules   int
}

// decode is decodeFile within the tree's decode budget.
func (b *loadBudget) decode(name string, data []byte, kind fileKind) (*parsedFile, ErrorList) {
	b.decoded += len(data)
	if b.decoded > MaxTreeDecodeBytes {
		e := &Error{File: name, Msg: fmt.Sprintf("the policies of this tree decode more than %d bytes of TOML (a file counts once per policy that includes it)", MaxTreeDecodeBytes)}
		return &parsedFile{name: name, settings: map[string]setting{}, present: map[string]bool{}, broken: true}, ErrorList{e}
	}
	return decodeFile(name, data, kind)
}

// exhausted is the problem of policy dir once the tree is over a budget,
// or nil.
func (b *loadBudget) exhausted(dir string) *Error {
	file := path.Join(dir, policyFile)
	switch {
	case b.rules > MaxTreeRules:
		return &Error{File: file, Msg: fmt.Sprintf("not loaded: the policies before it already have %d rules, over the limit of %d for a tree", b.rules, MaxTreeRules)}
	case b.decoded > MaxTreeDecodeBytes:
		return &Error{File: file, Msg: fmt.Sprintf("not loaded: the policies before it already decode more than %d bytes of TOML", MaxTreeDecodeBytes)}
	}
	return nil
}

// ErrTreeTooLarge is returned (wrapped) by ReadTree for a tree over
// MaxTreeBytes or MaxTreeFiles.
var ErrTreeTooLarge = errors.New("policies root too large")

// TreeFS is a tree of files (slash-separated paths relative to the root,
// as ReadTree and gitsource return them) as an fs.FS for Load.
// Directories are implied by the paths. The byte slices are shared, and
// must not be modified: a list loaded from the tree holds its file's
// bytes instead of a copy (sharedFile).
func TreeFS(files map[string][]byte) fs.FS {
	m := make(fstest.MapFS, len(files))
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	return treeFS{m}
}

// treeFS is TreeFS's file system. Reading a file through fs.FS copies
// it; a node's generation is a tree in memory (its raft state's bytes,
// never modified), and a list of a million entries is 18 MB of text that
// the node would then hold twice for as long as it serves the generation.
type treeFS struct{ fstest.MapFS }

// sharedFile returns the bytes of name without a copy.
func (t treeFS) sharedFile(name string) ([]byte, bool) {
	f, ok := t.MapFS[name]
	if !ok || !f.Mode.IsRegular() {
		return nil, false
	}
	return f.Data, true
}

// ReadTree reads every regular file under the root of fsys, as the leader
// reads a git tree: symbolic links, devices, pipes and sockets are not
// read, nor followed (with an os.Root's FS, directory entries report
// what a link is, not what it points to). It stops with ErrTreeTooLarge
// before reading past the budgets, so a huge directory costs nothing.
func ReadTree(fsys fs.FS) (map[string][]byte, error) {
	r := treeReader{fsys: fsys, out: map[string][]byte{}}
	if err := r.walk("."); err != nil {
		return nil, err
	}
	return r.out, nil
}

type treeReader struct {
	fsys  fs.FS
	out   map[string][]byte
	count TreeCounter
}

func (r *treeReader) walk(dir string) error {
	entries, err := fs.ReadDir(r.fsys, dir)
	if err != nil {
		return fmt.Errorf("policy: reading %s: %w", dir, err)
	}
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if err := r.walk(name); err != nil {
				return err
			}
		case e.Type().IsRegular():
			if err := r.read(name, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *treeReader) read(name string, e fs.DirEntry) error {
	info, err := e.Info()
	if err != nil {
		return fmt.Errorf("policy: reading %s: %w", name, err)
	}
	if err := r.count.Add(name, info.Size()); err != nil {
		return err
	}
	data, err := readUpTo(r.fsys, name, info.Size())
	if err != nil {
		return err
	}
	if grew := int64(len(data)) - info.Size(); grew > 0 {
		if err := r.count.Add(name, grew); err != nil {
			return err // it grew while read
		}
	}
	r.out[name] = data
	return nil
}

// budgetError is the error for a tree that reached file (the n-th file
// read, with size bytes so far) over a budget, or nil.
func budgetError(file string, n int, size int64) error {
	switch {
	case n > MaxTreeFiles:
		return fmt.Errorf("%w: more than %d files (at %s); keep other files outside the policies root", ErrTreeTooLarge, MaxTreeFiles, file)
	case size > MaxTreeBytes:
		return fmt.Errorf("%w: over %d bytes of paths and contents (at %s); keep large files outside the policies root", ErrTreeTooLarge, MaxTreeBytes, file)
	}
	return nil
}

// CheckTree checks a tree already in memory (one from the raft log, or
// read by another reader) against the tree budgets: nil, or one problem
// naming the file at which the tree went over, in path order.
func CheckTree(files map[string][]byte) *Error {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var c TreeCounter
	for _, name := range names {
		if err := c.Add(name, int64(len(files[name]))); err != nil {
			return &Error{File: name, Msg: err.Error()}
		}
	}
	return nil
}

// readUpTo reads a file that stated size bytes, refusing to read much more
// than that (a file that grows while read), so the budgets hold.
func readUpTo(fsys fs.FS, name string, size int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("policy: reading %s: %w", name, err)
	}
	defer f.Close()
	limit := size + 1<<20
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("policy: reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s grew while it was read", ErrTreeTooLarge, name)
	}
	return data, nil
}
