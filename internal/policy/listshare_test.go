package policy

import (
	"testing"
	"unsafe"
)

// TestListOfATreeSharesItsBytes: a list loaded from a tree of files in
// memory (a node's generation, from its raft state) holds the tree's
// bytes, not a copy: a million-entry list is 18 MB of text, which a node
// would otherwise hold twice.
func TestListOfATreeSharesItsBytes(t *testing.T) {
	t.Parallel()
	data := cidrs(1000)
	lists, errs := LoadLists(TreeFS(map[string][]byte{"_lists/shared-bytes.netset": data}))
	if errs != nil {
		t.Fatal(errs)
	}
	l := lists["shared-bytes"]
	if l == nil || l.Entries != 1000 {
		t.Fatalf("list = %+v", l)
	}
	if unsafe.SliceData(l.Data) != unsafe.SliceData(data) || len(l.Data) != len(data) {
		t.Error("the list holds a copy of the tree's bytes")
	}
}
