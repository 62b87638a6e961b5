package gitsource

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// objectWriter writes blobs, trees and commits straight into a
// repository's object storage: the clone is bare, so commits are built
// from trees rather than through a worktree and an index.
type objectWriter struct {
	st storer.EncodedObjectStorer
}

func (w objectWriter) blob(data []byte) (plumbing.Hash, error) {
	obj := w.st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	wr, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := wr.Write(data); err != nil {
		_ = wr.Close()
		return plumbing.ZeroHash, err
	}
	if err := wr.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return w.st.SetEncodedObject(obj)
}

// tree writes a tree, sorting its entries the way git does (a directory
// as if its name ended in "/"), which go-git checks but does not do.
func (w objectWriter) tree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sorted := append([]object.TreeEntry(nil), entries...)
	sort.Sort(object.TreeEntrySorter(sorted))
	obj := w.st.NewEncodedObject()
	if err := (&object.Tree{Entries: sorted}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return w.st.SetEncodedObject(obj)
}

func (w objectWriter) commit(c *object.Commit) (plumbing.Hash, error) {
	obj := w.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return w.st.SetEncodedObject(obj)
}

// replaceAt returns the tree base (zero: none) with the entry at parts set
// to the directory sub, or removed when sub is zero. Trees left empty
// disappear, as in git; the result is zero when nothing is left.
func (w objectWriter) replaceAt(base plumbing.Hash, parts []string, sub plumbing.Hash) (plumbing.Hash, error) {
	if len(parts) == 0 {
		return sub, nil
	}
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := object.GetTree(w.st, base)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, t.Entries...)
	}
	var child plumbing.Hash
	kept := entries[:0]
	for _, e := range entries {
		if e.Name != parts[0] {
			kept = append(kept, e)
		} else if e.Mode == filemode.Dir {
			child = e.Hash
		}
	}
	newChild, err := w.replaceAt(child, parts[1:], sub)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if !newChild.IsZero() {
		kept = append(kept, object.TreeEntry{Name: parts[0], Mode: filemode.Dir, Hash: newChild})
	}
	if len(kept) == 0 {
		return plumbing.ZeroHash, nil
	}
	return w.tree(kept)
}

// rootWith is replaceAt for a commit's root tree, which may be empty.
func (w objectWriter) rootWith(root plumbing.Hash, dir string, sub plumbing.Hash) (plumbing.Hash, error) {
	h, err := w.replaceAt(root, splitPath(dir), sub)
	if err != nil || !h.IsZero() {
		return h, err
	}
	return w.tree(nil)
}

// splitPath splits a clean slash path; "." is no parts.
func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// treeNode is a directory being built from files.
type treeNode struct {
	files map[string]object.TreeEntry
	dirs  map[string]*treeNode
}

func newTreeNode() *treeNode {
	return &treeNode{files: map[string]object.TreeEntry{}, dirs: map[string]*treeNode{}}
}

// add places a blob at the slash path p, refusing paths git or io/fs
// could not hold and a name used both as a file and as a directory.
func (n *treeNode) add(p string, mode filemode.FileMode, h plumbing.Hash) error {
	if !fs.ValidPath(p) || p == "." {
		return fmt.Errorf("gitsource: invalid file path %q", p)
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.EqualFold(part, ".git") {
			return fmt.Errorf("gitsource: invalid file path %q: .git is reserved", p)
		}
		if i == len(parts)-1 {
			break
		}
		if _, clash := n.files[part]; clash {
			return fmt.Errorf("gitsource: %q is both a file and a directory", p)
		}
		if n.dirs[part] == nil {
			n.dirs[part] = newTreeNode()
		}
		n = n.dirs[part]
	}
	last := parts[len(parts)-1]
	if _, clash := n.dirs[last]; clash {
		return fmt.Errorf("gitsource: %q is both a file and a directory", p)
	}
	n.files[last] = object.TreeEntry{Name: last, Mode: mode, Hash: h}
	return nil
}

// write stores the directory and everything below it.
func (n *treeNode) write(w objectWriter) (plumbing.Hash, error) {
	entries := make([]object.TreeEntry, 0, len(n.files)+len(n.dirs))
	for _, e := range n.files {
		entries = append(entries, e)
	}
	for name, d := range n.dirs {
		h, err := d.write(w)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	return w.tree(entries)
}

// filesTree stores files (slash paths to contents, regular files) as a
// tree; zero when there are none.
func (w objectWriter) filesTree(files map[string][]byte) (plumbing.Hash, error) {
	if len(files) == 0 {
		return plumbing.ZeroHash, nil
	}
	root := newTreeNode()
	for p, data := range files {
		h, err := w.blob(data)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if err := root.add(p, filemode.Regular, h); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return root.write(w)
}

// replaceFile returns the tree base (zero: none) with the file at parts
// set to blob, keeping its mode (regular when new), or removed when blob
// is zero. Trees left empty disappear; every other entry stays as it is.
func (w objectWriter) replaceFile(base plumbing.Hash, parts []string, blob plumbing.Hash) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := object.GetTree(w.st, base)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, t.Entries...)
	}
	var child plumbing.Hash
	mode := filemode.Regular
	kept := entries[:0]
	for _, e := range entries {
		switch {
		case e.Name != parts[0]:
			kept = append(kept, e)
		case e.Mode == filemode.Dir:
			child = e.Hash
		default:
			mode = e.Mode
		}
	}
	entry := object.TreeEntry{Name: parts[0], Mode: mode, Hash: blob}
	if len(parts) > 1 {
		h, err := w.replaceFile(child, parts[1:], blob)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entry = object.TreeEntry{Name: parts[0], Mode: filemode.Dir, Hash: h}
	} else if !child.IsZero() {
		kept = append(kept, object.TreeEntry{Name: parts[0], Mode: filemode.Dir, Hash: child}) // not a file: leave it
		entry.Hash = plumbing.ZeroHash
	}
	if !entry.Hash.IsZero() {
		kept = append(kept, entry)
	}
	if len(kept) == 0 {
		return plumbing.ZeroHash, nil
	}
	return w.tree(kept)
}
