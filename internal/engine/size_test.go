package engine

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// prefixPolicy is n rules of twelve prefix tests each.
func prefixPolicy(name string, n int) *policy.Policy {
	p := &policy.Policy{Name: name, DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny}
	for r := range n {
		terms := make([]string, 12)
		for k := range terms {
			terms[k] = fmt.Sprintf("request.path.startsWith('/%s/r%d/x%d')", name, r, k)
		}
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("r%d", r), Priority: int64(r + 1),
			Action: policy.ActionDeny, Match: strings.Join(terms, " || ")})
	}
	return p
}

// regexPolicy is n rules of twelve `[a-z]{40,200}` patterns each.
func regexPolicy(name string, n int) *policy.Policy {
	p := &policy.Policy{Name: name, DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny}
	for r := range n {
		terms := make([]string, 12)
		for k := range terms {
			terms[k] = fmt.Sprintf("request.path.matches('^/%s%d[a-z]{40,200}K%d')", name, r, k)
		}
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("r%d", r), Priority: int64(r + 1),
			Action: policy.ActionDeny, Match: strings.Join(terms, " || ")})
	}
	return p
}

// listPolicy is n rules, each a list of 1,500 paths (near the limit on
// the length of a match).
func listPolicy(name string, n int) *policy.Policy {
	p := &policy.Policy{Name: name, DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny}
	for r := range n {
		items := make([]string, 1500)
		for k := range items {
			items[k] = fmt.Sprintf("'/%d/%d'", r, k)
		}
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("r%d", r), Priority: int64(r + 1),
			Action: policy.ActionDeny, Match: "request.path in [" + strings.Join(items, ", ") + "]"})
	}
	return p
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestSizeBytesCalibration: the bytes a Size stands for (BytesPerExprNode,
// BytesPerRegexInst) are no less than what compiled programs of that size
// keep on the heap, for the two shapes that cost most: prefix tests and
// large regexes. The measured figures are logged.
func TestSizeBytesCalibration(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *policy.Policy
	}{
		{"prefix", prefixPolicy("prefix", 400)},
		{"regex", regexPolicy("regex", 20)},
		{"list", listPolicy("list", 10)},
	} {
		before := heapInUse()
		cp, size, err := CompileWithin(tc.p, DefaultOptions(), nil, func(Size) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		kept := heapInUse() - before
		runtime.KeepAlive(cp)
		t.Logf("%s: %d rules, %+v, %d KiB kept (%d bytes a node), estimated %d KiB",
			tc.name, len(tc.p.Rules), size, kept>>10, kept/int64(max(1, size.ExprNodes)), size.Bytes()>>10)
		if size.Bytes() < kept {
			t.Errorf("%s: estimated %d bytes, but the programs keep %d", tc.name, size.Bytes(), kept)
		}
	}
}

// TestCompileWithinCountsOnlyNewRules: beside a live policy, only the
// rules it does not share are charged; a refusal compiles nothing and
// returns admit's error.
func TestCompileWithinCountsOnlyNewRules(t *testing.T) {
	live := prefixPolicy("web", 10)
	base, err := Compile(live, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	exp := prefixPolicy("web", 10)
	exp.Rules[3].Match = "request.path == '/changed'"
	_, full, err := CompileWithin(exp, DefaultOptions(), nil, func(Size) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cp, added, err := CompileWithin(exp, DefaultOptions(), base, func(Size) error { return nil })
	if err != nil || cp == nil {
		t.Fatal(err)
	}
	if added.ExprNodes <= 0 || added.ExprNodes >= full.ExprNodes/5 {
		t.Fatalf("one changed rule of ten adds %+v; the whole policy is %+v", added, full)
	}
	refused := errors.New("over the budget")
	cp, _, err = CompileWithin(exp, DefaultOptions(), nil, func(Size) error { return refused })
	if cp != nil || !errors.Is(err, refused) {
		t.Fatalf("refused: %v, %v", cp, err)
	}
}

// TestAbortStopsACompile: a compile whose Options.Abort is set while it
// runs (here by admit, between measuring and compiling) or before it
// begins returns ErrAborted and no policy; a node that stops does not wait
// for it.
func TestAbortStopsACompile(t *testing.T) {
	t.Parallel()
	exp := prefixPolicy("web", 50)
	opts := DefaultOptions()
	opts.Abort = new(atomic.Bool)
	cp, _, err := CompileWithin(exp, opts, nil, func(Size) error { opts.Abort.Store(true); return nil })
	if cp != nil || !errors.Is(err, ErrAborted) {
		t.Fatalf("aborted while compiling: %v, %v", cp, err)
	}
	if cp, err := Compile(exp, opts); cp != nil || !errors.Is(err, ErrAborted) {
		t.Fatalf("aborted before compiling: %v, %v", cp, err)
	}
	opts.Abort.Store(false)
	if cp, err := Compile(exp, opts); cp == nil || err != nil {
		t.Fatalf("not aborted: %v, %v", cp, err)
	}
}
