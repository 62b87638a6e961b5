package engine

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/policyrollout/reconciler/internal/policy"
)

// The list functions: inIpList(ip, 'name') and inList(value, 'name').
const (
	inIPListFunc      = "inIpList"
	inListFunc        = "inList"
	inIPListOverload  = "in_ip_list_string_string"
	inListOverload    = "in_list_string_string"
	listArgumentIndex = 1
)

// compiledList is a named list compiled for lookups: sorted address
// intervals (ipTable) for an IP list, a hash set for a string list. It is
// immutable, and shared by every rule, policy and generation that uses the
// same content (listCache).
type compiledList struct {
	kind    policy.ListKind
	ips     *ipTable
	strs    map[string]struct{}
	entries int
	// data is the list's text, which a later content derives from
	// (deriveList) and matchedEntry searches. It is the file's bytes as
	// loaded, shared with the tree (and a node's raft state), not a copy.
	data []byte
}

// containsIP reports whether the address s is inside an entry. It parses
// as inIpRange does (IPv4-mapped IPv6 unmapped, zones never match).
func (l *compiledList) containsIP(s string) bool {
	a, ok := parseLenientIP(s)
	return ok && l.ips.contains(a)
}

// matchedEntry is the longest entry of an IP list holding ip and the
// first line it is on, for tools that explain a decision; ok is false when
// none does. The table has merged its entries away, so this reads the
// list's text: a pass over every line, once per explained request.
func (l *compiledList) matchedEntry(ip string) (p netip.Prefix, line int, ok bool) {
	a, valid := parseLenientIP(ip)
	if !valid || !l.ips.contains(a) {
		return netip.Prefix{}, 0, false
	}
	_ = policy.EachEntry(l.data, l.kind, func(n int, e string) error {
		if q, err := policy.ParseIPEntry(e); err == nil && q.Contains(a) && (!ok || q.Bits() > p.Bits()) {
			p, line, ok = q, n, true
		}
		return nil
	})
	return p, line, ok
}

// listCompiles counts compileList calls (TestValidateTreeCompilesAListOnce)
// and listDerives deriveList's successes.
var listCompiles, listDerives atomic.Uint64

var errTooManyDerived = errors.New("too many entries to derive")

// compileList builds the structure of a validated list.
func compileList(l *policy.List) (*compiledList, error) {
	listCompiles.Add(1)
	c := &compiledList{kind: l.Kind, entries: l.Entries, data: l.Data}
	if l.Kind == policy.ListIP {
		var b ipTableBuilder
		err := l.Each(func(line int, e string) error {
			p, err := policy.ParseIPEntry(e)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", l.File, line, err)
			}
			b.add(p)
			return nil
		})
		c.ips = b.table()
		return c, err
	}
	c.strs = make(map[string]struct{}, l.Entries)
	err := l.Each(func(_ int, e string) error {
		c.strs[e] = struct{}{}
		return nil
	})
	return c, err
}

// listCache shares compiled lists by content hash while anything (a
// generation, an experiment, the previous generation) holds them, so an
// unchanged list is compiled once however many generations use it.
type listCache struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[compiledList]
	// recent are the lists last shared for each kind and file, the bases
	// the next content of that file derives from (deriveList).
	recent policy.Recent[compiledList]
	// measured is the heap each list measureLists measured holds
	// (listremeasure.go).
	measured map[weak.Pointer[compiledList]]int64
}

var lists = &listCache{m: map[string]weak.Pointer[compiledList]{}}

// get returns the compiled form of l, compiling it on first use. A list
// without its data (from JSON) is found by its hash, or through find, or
// is an error.
func (c *listCache) get(l *policy.List, find *ListFinder) (*compiledList, error) {
	key := listKey(l)
	c.mu.Lock()
	cl := c.m[key].Value()
	c.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	if l.Data == nil && l.Entries > 0 {
		found, err := withFoundData(l, find)
		if err != nil {
			return nil, err
		}
		l = found
	}
	for _, base := range c.recent.Get(fileKey(l)) {
		if d := deriveList(base, l); d != nil {
			return c.put(l, d), nil
		}
	}
	cl, err := compileList(l)
	if err != nil {
		return nil, err
	}
	return c.put(l, cl), nil
}

// put shares cl, compiled from l, with later gets; when another caller
// shared l's content meanwhile, put returns that one instead.
func (c *listCache) put(l *policy.List, cl *compiledList) *compiledList {
	key := listKey(l)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.m[key].Value(); prev != nil {
		return prev
	}
	for k, w := range c.m {
		if w.Value() == nil {
			delete(c.m, k)
		}
	}
	c.m[key] = weak.Make(cl)
	c.recent.Add(fileKey(l), cl)
	return cl
}

// withFoundData is l with the data find returns, when its content has
// l's hash.
func withFoundData(l *policy.List, find *ListFinder) (*policy.List, error) {
	var data []byte
	if find != nil && find.Find != nil {
		data = find.Find(l)
	}
	if data == nil {
		return nil, fmt.Errorf("list %q (etag %.32s) is not on this node: neither in a generation's tree nor sent with the experiment", l.Name, l.Hash)
	}
	if policy.ContentHash(data) != l.Hash {
		return nil, fmt.Errorf("list %q: the data found is not the content of etag %.32s", l.Name, l.Hash)
	}
	c := *l
	c.Data = data
	return &c, nil
}

func listKey(l *policy.List) string { return string(l.Kind) + ":" + l.Hash }

func fileKey(l *policy.List) string { return string(l.Kind) + ":" + l.File }

// policyLists are the compiled lists of one policy, by name, and the CEL
// program option that binds the list functions to them.
type policyLists struct {
	byName map[string]*compiledList
	src    policy.Lists
	funcs  cel.ProgramOption
}

// compileLists compiles (or shares) the lists p uses; find supplies the
// data of one neither held nor carried (Options.FindList).
func compileLists(p *policy.Policy, find *ListFinder) (*policyLists, error) {
	pl := &policyLists{byName: make(map[string]*compiledList, len(p.Lists)), src: p.Lists}
	for name, l := range p.Lists {
		cl, err := lists.get(l, find)
		if err != nil {
			return nil, err
		}
		pl.byName[name] = cl
	}
	pl.funcs = cel.Functions(
		&functions.Overload{Operator: inIPListOverload, Binary: pl.inIPList},
		&functions.Overload{Operator: inListOverload, Binary: pl.inList},
	)
	return pl, nil
}

func (pl *policyLists) inIPList(lhs, rhs ref.Val) ref.Val {
	ip, ok1 := lhs.(types.String)
	name, ok2 := rhs.(types.String)
	l := pl.byName[string(name)]
	if !ok1 || !ok2 || l == nil || l.kind != policy.ListIP {
		return types.NewErr("inIpList: no IP list %q", string(name)) // compile-time checks make this unreachable
	}
	return types.Bool(l.containsIP(string(ip)))
}

func (pl *policyLists) inList(lhs, rhs ref.Val) ref.Val {
	v, ok1 := lhs.(types.String)
	name, ok2 := rhs.(types.String)
	l := pl.byName[string(name)]
	if !ok1 || !ok2 || l == nil || l.kind != policy.ListString {
		return types.NewErr("inList: no string list %q", string(name))
	}
	_, in := l.strs[string(v)]
	return types.Bool(in)
}

// listLib declares the list functions. Their implementations are bound
// per policy at program time (policyLists.funcs), since the same name is
// different data in two generations.
func listLib() cel.EnvOption {
	return cel.Lib(listDecls{})
}

type listDecls struct{}

// CompileOptions implements cel.Library.
func (listDecls) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function(inIPListFunc, cel.Overload(inIPListOverload, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType)),
		cel.Function(inListFunc, cel.Overload(inListOverload, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType)),
	}
}

// ProgramOptions implements cel.Library.
func (listDecls) ProgramOptions() []cel.ProgramOption { return nil }

// checkListCalls checks every list call of a checked match against the
// policy's lists: the name a plain quoted literal in match's text, the
// list present and of the kind the function wants. The problems name the
// list; the caller the rule.
//
// The name must appear in the text as written ('name' or "name", no
// escapes) because the loader attaches a policy's lists by reading the
// text (policy.attachLists) and previews find the rules a changed list
// touches the same way (namesAny): a name spelt with escapes would reach
// neither.
func checkListCalls(a *ast.AST, pl *policyLists, match string) []string {
	var out []string
	root := ast.NavigateAST(a)
	for _, f := range []struct {
		fn   string
		want policy.ListKind
	}{{inIPListFunc, policy.ListIP}, {inListFunc, policy.ListString}} {
		fn, want := f.fn, f.want
		for _, call := range ast.MatchDescendants(root, ast.FunctionMatcher(fn)) {
			args := call.AsCall().Args()
			name, ok := literalString(args[listArgumentIndex])
			l := pl.byName[name]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s: the list name must be a string literal", fn))
			case !strings.Contains(match, "'"+name+"'") && !strings.Contains(match, `"`+name+`"`):
				out = append(out, fmt.Sprintf("%s: write the list name as it is, in quotes ('%s'), without escapes", fn, name))
			case l == nil:
				out = append(out, fmt.Sprintf("%s: unknown list %q (no %s/%s.netset, .ipset or .txt at the policies root)", fn, name, policy.ListsDir, name))
			case l.kind != want:
				out = append(out, fmt.Sprintf("%s: list %q is %s; use %s", fn, name, kindText(l.kind), otherListFunc(fn)))
			}
		}
	}
	return out
}

func kindText(k policy.ListKind) string {
	if k == policy.ListIP {
		return "an IP list"
	}
	return "a string list"
}

func otherListFunc(fn string) string {
	if fn == inIPListFunc {
		return inListFunc + " for a string list"
	}
	return inIPListFunc + " for an IP list"
}
