package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
	"weak"
)

// List is a named list of data (`_lists/NAME.netset|.ipset|.txt` at the
// policies root), validated: every line is a comment, blank, or an entry
// of its kind. It is immutable and shared by every policy that uses it.
//
// In JSON (an experiment's policy in the raft log) a list is its name,
// file, kind, hash and entry count, not its data: the data travels with
// the generation's tree, and the engine finds it by hash.
type List struct {
	Name string   `json:"name"`
	File string   `json:"file"` // relative to the policies root
	Kind ListKind `json:"kind"`
	// Hash is the SHA-256 of the file, in hex: the list's etag, and the
	// key under which the engine shares its compiled form.
	Hash    string `json:"hash"`
	Entries int    `json:"entries"`
	Data    []byte `json:"-"`
}

// Etag is the first 128 bits of Hash, as a policy's etag is shown.
func (l *List) Etag() string { return l.Hash[:32] }

// Each calls fn with every entry of the list and its 1-based line number
// (counting comments and blank lines), stopping at fn's first error.
func (l *List) Each(fn func(line int, entry string) error) error {
	return eachLine(l.Data, l.Kind, func(n int, e string) error { return fn(n, e) })
}

// ParseIPEntry parses an entry of an IP list: an IPv4 or IPv6 address or
// CIDR. Addresses are whole prefixes; an IPv4-mapped IPv6 address is its
// IPv4 address, since inIpList unmaps what it tests; host bits of a CIDR
// are cleared, as FireHOL's and providers' exports rely on.
func ParseIPEntry(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, errors.New("not an IP address or CIDR")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not an IP address or CIDR")
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("an IPv4-mapped IPv6 CIDR: write the IPv4 CIDR")
	}
	return p.Masked(), nil
}

// EachEntry calls fn with every entry of data, lines of a list of kind
// (a whole file or whole lines of one), and its 1-based line number there.
func EachEntry(data []byte, kind ListKind, fn func(line int, entry string) error) error {
	return eachLine(data, kind, fn)
}

// eachLine splits a list into entries. A line's `#` starts a comment in an
// IP list (FireHOL writes them at the start; some exports after an entry);
// in a string list only a line whose first non-blank byte is `#` is one.
func eachLine(data []byte, kind ListKind, fn func(line int, entry string) error) error {
	n := 0
	for raw := range bytes.Lines(data) {
		n++
		if e, ok := entryOf(bytes.TrimSuffix(raw, []byte("\n")), kind); ok {
			if err := fn(n, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// entryOf is a line's entry, or false for a blank line or a comment.
func entryOf(line []byte, kind ListKind) (string, bool) {
	line = bytes.TrimSpace(line)
	if kind == ListIP {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = bytes.TrimSpace(line[:i])
		}
	}
	if len(line) == 0 || line[0] == '#' {
		return "", false
	}
	return string(line), true
}

// parseList validates a list file's content and counts its entries, with
// a problem per malformed line (the first maxListProblems of them).
func parseList(file, name string, kind ListKind, data []byte) (*List, ErrorList) {
	hash := ContentHash(data)
	key := file + "\x00" + hash
	if l := parsed.get(key); l != nil {
		return l, nil
	}
	var l *List
	for _, base := range parsed.recent.Get(file) {
		if l = revalidate(base, file, name, kind, data); l != nil {
			break
		}
	}
	var errs ErrorList
	if l == nil {
		l, errs = parseListData(file, name, kind, data)
	}
	if l != nil {
		l.Hash = hash
		parsed.put(key, l)
	}
	return l, errs
}

// ContentHash is a list file's List.Hash: the SHA-256 of data, in hex.
func ContentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// parsedCache remembers lists validated already, by file and content hash,
// while something (a generation, an experiment) still holds them: the
// leader and every node load the same tree several times, and a list of a
// million entries is worth validating once.
type parsedCache struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[List]
	// recent are the lists last validated from each file, which the next
	// content of that file revalidates against (revalidate).
	recent Recent[List]
}

var parsed = &parsedCache{m: map[string]weak.Pointer[List]{}}

func (c *parsedCache) get(key string) *List {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key].Value()
}

func (c *parsedCache) put(key string, l *List) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, w := range c.m { // forget what was collected, so the map stays small
		if w.Value() == nil {
			delete(c.m, k)
		}
	}
	c.m[key] = weak.Make(l)
	c.recent.Add(l.File, l)
}

func parseListData(file, name string, kind ListKind, data []byte) (*List, ErrorList) {
	var errs ErrorList
	bad, entries, n := 0, 0, 0
	report := func(line int, raw []byte, msg string) {
		if bad++; bad <= maxListProblems {
			errs = append(errs, &Error{File: file, Line: line, Msg: fmt.Sprintf("%s: %s", quoteBounded(raw), msg)})
		}
	}
	// One pass, no slice of every line: a file may have millions.
	for raw := range bytes.Lines(data) {
		n++
		raw = bytes.TrimSuffix(raw, []byte("\n"))
		if msg := lineProblem(raw); msg != "" {
			report(n, raw, msg)
			continue
		}
		e, ok := entryOf(raw, kind)
		if !ok {
			continue
		}
		if entries++; entries > MaxListEntries {
			return nil, ErrorList{{File: file, Line: n, Msg: fmt.Sprintf("over %d entries, the limit of a list (MaxListEntries)", MaxListEntries)}}
		}
		if kind == ListIP {
			if _, err := ParseIPEntry(e); err != nil {
				report(n, []byte(e), err.Error())
			}
		}
	}
	if bad > maxListProblems {
		errs = append(errs, &Error{File: file, Msg: fmt.Sprintf("%d more malformed lines", bad-maxListProblems)})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &List{Name: name, File: file, Kind: kind, Entries: entries, Data: data}, nil
}

// lineProblem is what is wrong with a line whatever the list's kind: its
// length, invalid UTF-8, control characters (binary content).
func lineProblem(raw []byte) string {
	raw = bytes.TrimSuffix(raw, []byte("\r"))
	switch {
	case len(raw) > MaxListLineBytes:
		return fmt.Sprintf("a line of %d bytes, over the limit of %d (MaxListLineBytes)", len(raw), MaxListLineBytes)
	case !utf8.Valid(raw):
		return "not UTF-8 text"
	case bytes.ContainsFunc(raw, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }):
		return "a control character (binary content?)"
	}
	return ""
}

// quoteBounded quotes a line for a problem, cut to 80 bytes.
func quoteBounded(raw []byte) string {
	if len(raw) > 80 {
		return fmt.Sprintf("%q…", raw[:80])
	}
	return fmt.Sprintf("%q", raw)
}

// Lists is every named list of a tree, by name.
type Lists map[string]*List

// LoadLists reads and validates every file under _lists/ of fsys. A tree
// without the directory has no lists. Problems name the file and line,
// and the budget a list is over; a list with problems is in the map with
// a nil value, so that a policy using it says so (attachLists).
func LoadLists(fsys fs.FS) (Lists, ErrorList) {
	entries, err := fs.ReadDir(fsys, ListsDir)
	if err != nil {
		return Lists{}, nil
	}
	out := Lists{}
	var errs ErrorList
	total := 0
	for _, e := range entries {
		file := path.Join(ListsDir, e.Name())
		l, problems := loadList(fsys, file, e)
		if len(problems) > 0 {
			errs = append(errs, problems...)
			if name, _, err := listOf(file); err == nil {
				out[name] = nil // named, but broken: see attachLists
			}
			continue
		}
		if prev, dup := out[l.Name]; dup && prev != nil {
			errs = append(errs, &Error{File: file, Msg: fmt.Sprintf("list %q is also %s", l.Name, prev.File)})
			continue
		}
		if total += l.Entries; total > MaxTreeListEntries {
			errs = append(errs, &Error{File: file, Msg: fmt.Sprintf("the lists have %d entries with this one, over the limit of %d for a tree (MaxTreeListEntries)", total, MaxTreeListEntries)})
			break
		}
		out[l.Name] = l
	}
	return out, errs
}

func loadList(fsys fs.FS, file string, e fs.DirEntry) (*List, ErrorList) {
	if !e.Type().IsRegular() {
		return nil, ErrorList{{File: file, Msg: "not a list: _lists/ holds list files only"}}
	}
	name, kind, err := listOf(file)
	if err != nil {
		return nil, ErrorList{{File: file, Msg: err.Error()}}
	}
	info, err := e.Info()
	if err == nil && info.Size() > MaxListFileBytes {
		err = fmt.Errorf("%d bytes, over the %d byte limit of a list file (MaxListFileBytes)", info.Size(), MaxListFileBytes)
	}
	var data []byte
	if t, ok := fsys.(treeFS); ok && err == nil {
		data, ok = t.sharedFile(file)
		if !ok {
			err = fmt.Errorf("policy: reading %s: %w", file, fs.ErrNotExist)
		}
	} else if err == nil {
		data, err = readUpTo(fsys, file, info.Size())
	}
	if err != nil {
		return nil, ErrorList{{File: file, Msg: err.Error()}}
	}
	return parseList(file, name, kind, data)
}

// listCall finds whether a match calls a list function, and quotedName
// the names it quotes ('name', "name", r'name'). The engine checks the
// calls exactly, on the parsed expression, and wants a list's name
// written as it is; every quoted name of a rule that calls a list function
// is at least those, so that a policy's etag covers every list it uses (a
// pattern of the call's shape missed calls whose first argument held
// commas or nested calls). A rule that also quotes a list's name for
// another purpose is given that list too: its etag then follows a list it
// does not read, which is safe.
var (
	listCall   = regexp.MustCompile(`\b(?:inIpList|inList)\s*\(`)
	quotedName = regexp.MustCompile(`'([a-z0-9-]+)'|"([a-z0-9-]+)"`)
)

// attachLists gives p the lists its rules name (those that exist: the
// engine refuses a name that does not), and a problem per rule using a
// list that is invalid, whose own problems say why.
func (p *Policy) attachLists(lists Lists) ErrorList {
	var errs ErrorList
	for _, r := range p.Rules {
		if !listCall.MatchString(r.Match) {
			continue
		}
		for _, m := range quotedName.FindAllStringSubmatch(r.Match, -1) {
			name := m[1] + m[2]
			l, ok := lists[name]
			if ok && l == nil {
				errs = append(errs, &Error{File: r.Pos.File, Line: r.Pos.Line, Rule: r.Name,
					Msg: fmt.Sprintf("rule %q: uses list %q, which is invalid", r.Name, name)})
			}
			if l != nil {
				if p.Lists == nil {
					p.Lists = Lists{}
				}
				p.Lists[name] = l
			}
		}
	}
	return errs
}

// UseLists gives p, a policy without lists (one from an API body, whose
// JSON cannot carry list data), the lists of lists its rules name, as
// Load does: an API experiment uses the live generation's lists.
func (p *Policy) UseLists(lists Lists) *Policy {
	if p == nil || p.Lists != nil || len(lists) == 0 || !p.usesLists() {
		return p
	}
	c := *p
	c.attachLists(lists)
	return &c
}

// usesLists reports whether a rule of p may name a list.
func (p *Policy) usesLists() bool {
	for _, r := range p.Rules {
		if strings.Contains(r.Match, "List") {
			return true
		}
	}
	return false
}

// listHashes is the canonical form's record of the lists a policy uses:
// name -> hash, so that a change to a list changes the policy's etag.
func (p *Policy) listHashes() map[string]string {
	if len(p.Lists) == 0 {
		return nil
	}
	out := make(map[string]string, len(p.Lists))
	names := make([]string, 0, len(p.Lists))
	for name := range p.Lists {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out[name] = p.Lists[name].Hash
	}
	return out
}
