package policy

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Budgets of named lists (`_lists/NAME.netset`, `.ipset`, `.txt`): data,
// not code, so they are counted apart from MaxTreeBytes and grow linearly
// with what they hold. Every refusal names the budget it hit.
const (
	// ListsDir is the directory of named lists at the policies root.
	ListsDir = "_lists"

	// MaxListFileBytes bounds one list file; its size is checked before
	// it is read. A million mixed IPv4/IPv6 CIDRs take about 20 MB.
	MaxListFileBytes = 48 << 20

	// MaxTreeListBytes bounds all list files of a tree together.
	MaxTreeListBytes = 96 << 20

	// MaxListEntries bounds the entries of one list.
	MaxListEntries = 2_000_000

	// MaxTreeListEntries bounds the entries of every list of a tree.
	MaxTreeListEntries = 4_000_000

	// MaxLists bounds how many list files a tree holds.
	MaxLists = 256

	// MaxListLineBytes bounds one line of a list; no address, CIDR or
	// host name comes near it.
	MaxListLineBytes = 1024

	// MaxListCompiledBytesPerEntry bounds what a list costs once compiled,
	// per entry, as the validation measures it (engine.MeasureLists).
	MaxListCompiledBytesPerEntry = 256

	// maxListProblems is how many malformed lines of one file are
	// reported; the rest are counted.
	maxListProblems = 10
)

// listName is what NAME may be in `_lists/NAME.ext`.
var listName = regexp.MustCompile(`^[a-z0-9-]+$`)

// ListKind says what a list holds.
type ListKind string

// The kinds of list, by file extension.
const (
	ListIP     ListKind = "ip"     // .netset, .ipset: addresses and CIDRs
	ListString ListKind = "string" // .txt: exact strings
)

// IsListFile reports whether name (relative to the policies root) is in
// the lists directory, whatever its name: such files are data, counted by
// the list budgets rather than MaxTreeBytes.
func IsListFile(name string) bool {
	return strings.HasPrefix(name, ListsDir+"/")
}

// listOf returns a list file's name and kind, or an error for a file in
// _lists/ that is not a list (a wrong extension, a bad name, a subdirectory).
func listOf(file string) (name string, kind ListKind, err error) {
	base := strings.TrimPrefix(file, ListsDir+"/")
	ext := path.Ext(base)
	name = strings.TrimSuffix(base, ext)
	switch ext {
	case ".netset", ".ipset":
		kind = ListIP
	case ".txt":
		kind = ListString
	default:
		return "", "", fmt.Errorf("not a list: a list is _lists/NAME.netset or .ipset (IP addresses and CIDRs) or _lists/NAME.txt (strings)")
	}
	if !listName.MatchString(name) {
		return "", "", fmt.Errorf("list name %q must match [a-z0-9-]+", name)
	}
	return name, kind, nil
}

// TreeCounter counts a tree's files against the tree budgets as a reader
// meets them, before their contents are read: list files against the list
// budgets, every other file against MaxTreeBytes and MaxTreeFiles.
// ReadTree, CheckTree and gitsource use it, so a tree is refused for the
// same reason wherever it comes from.
type TreeCounter struct {
	files, lists    int
	bytes, listSize int64
}

// Add counts file name of size bytes, and returns an error wrapping
// ErrTreeTooLarge, naming the budget, once the tree is over one.
func (c *TreeCounter) Add(name string, size int64) error {
	if !IsListFile(name) {
		c.files++
		c.bytes += size + int64(len(name))
		return budgetError(name, c.files, c.bytes)
	}
	c.lists++
	c.listSize += size
	switch {
	case c.lists > MaxLists:
		return fmt.Errorf("%w: more than %d list files (MaxLists, at %s)", ErrTreeTooLarge, MaxLists, name)
	case size > MaxListFileBytes:
		return fmt.Errorf("%w: %s is %d bytes, over the %d byte limit of a list file (MaxListFileBytes)", ErrTreeTooLarge, name, size, MaxListFileBytes)
	case c.listSize > MaxTreeListBytes:
		return fmt.Errorf("%w: the list files are over %d bytes together (MaxTreeListBytes, at %s)", ErrTreeTooLarge, MaxTreeListBytes, name)
	}
	return nil
}
