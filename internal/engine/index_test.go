package engine

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// TestIndexEquivalence is the proof obligation of DESIGN.md: over random
// policies and requests, the indexed decision (verdict, rule and error) is
// identical to plain priority-order evaluation, and every rule the index
// skips really evaluates to false without error.
func TestIndexEquivalence(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	policies, requests := 400, 150
	if testing.Short() || raceEnabled {
		policies = 60
	}
	r := rand.New(rand.NewPCG(20240611, 7))
	for i := range policies {
		n := 1 + r.IntN(40)
		if i%40 == 0 {
			n = 65 + r.IntN(150) // several bitset words
		}
		p := genPolicy(r, n)
		opts := DefaultOptions()
		if i%4 == 0 {
			// Small enough that many groups blow it: rules under it stay
			// indexed, their hoisted programs must still agree.
			opts.RuntimeCostLimit = uint64(100 + r.IntN(400))
		}
		indexed := mustCompile(t, p, opts)
		opts.DisableIndex = true
		plain := mustCompile(t, p, opts)
		for range requests {
			req := genRequest(r)
			want, got := plain.Evaluate(req), indexed.Evaluate(req)
			if got != want {
				t.Fatalf("policy %d, request %+v:\nindexed %+v\nplain   %+v\nrules:\n%s", i, req, got, want, ruleDump(p))
			}
			checkSkipped(t, indexed, req)
			checkFastAgrees(t, indexed, req)
			checkMemoAgrees(t, plain, req)
		}
	}
}

// TestIndexEquivalenceFirewall compares both modes on the 1,000-rule
// benchmark policy, whose bitsets span many words.
func TestIndexEquivalenceFirewall(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	if testing.Short() {
		t.Skip("compiles 2,000 rules")
	}
	p := firewallPolicy(1000, 42)
	indexed := mustCompile(t, p, DefaultOptions())
	plain := mustCompile(t, p, Options{DisableIndex: true})
	for _, req := range fwRequests(300, 8) {
		if got, want := indexed.Evaluate(req), plain.Evaluate(req); got != want {
			t.Fatalf("request %+v: indexed %+v, plain %+v", req, got, want)
		}
	}
}

// checkSkipped evaluates every rule the index leaves out, which must be
// false without error, and every rule it decides alone, which must be true.
func checkSkipped(t *testing.T, cp *CompiledPolicy, req *Request) {
	t.Helper()
	want := make([]ref.Val, len(cp.rules)) // nil: no claim
	ev := &evaluation{cp: cp, req: req}
	defer ev.release()
	var c cursor
	cp.index.candidates(&c, req, ev)
	for i := range cp.rules {
		want[i] = types.False
	}
	for i := c.next(ev); i >= 0; i = c.next(ev) {
		want[i] = nil
		if c.decided(i) {
			want[i] = types.True
		}
		if r := cp.rules[i]; c.known(i) && r.residual != nil {
			checkResidual(t, cp, &r, req)
		}
	}
	for i, rule := range cp.rules {
		if want[i] == nil {
			continue
		}
		for _, prg := range []cel.Program{rule.tracked, rule.fast} {
			if prg == nil {
				continue
			}
			out, _, err := prg.Eval((*activation)(req))
			if err != nil || out != want[i] {
				t.Fatalf("index claims rule %q (%s) is %v for %+v, but it gives %v, %v",
					rule.name, matchOf(cp, rule.name), want[i], req, out, err)
			}
		}
	}
}

// checkResidual: with the constraints found true, the residual match
// answers as the whole match does, error text included. Like the fast plan
// it is only used within the estimate's sizes.
func checkResidual(t *testing.T, cp *CompiledPolicy, r *compiledRule, req *Request) {
	t.Helper()
	if !fitsEstimate(req) {
		return
	}
	o1, _, e1 := r.fast.Eval((*activation)(req))
	o2, _, e2 := r.residual.Eval((*activation)(req))
	if fmt.Sprint(o1, e1) != fmt.Sprint(o2, e2) {
		t.Fatalf("rule %q (%s) on %+v: whole %v, %v; residual %v, %v",
			r.name, matchOf(cp, r.name), req, o1, e1, o2, e2)
	}
}

// checkFastAgrees backs the claim that lets Evaluate drop cost tracking:
// within the estimate's sizes the run-time limit never fires, so the
// untracked plan answers as the tracked one does.
func checkFastAgrees(t *testing.T, cp *CompiledPolicy, req *Request) {
	t.Helper()
	if !fitsEstimate(req) {
		return
	}
	for _, rule := range cp.rules {
		if rule.fast == nil {
			continue
		}
		o1, _, e1 := rule.tracked.Eval((*activation)(req))
		o2, _, e2 := rule.fast.Eval((*activation)(req))
		if (e1 == nil) != (e2 == nil) || e1 == nil && o1 != o2 {
			t.Fatalf("rule %q (%s) on %+v: tracked %v, %v; untracked %v, %v",
				rule.name, matchOf(cp, rule.name), req, o1, e1, o2, e2)
		}
	}
}

// checkMemoAgrees backs the per-evaluation field values of Evaluate: every
// program, run in rule order against one shared evalState (so that later
// rules get the values earlier ones built), answers as with activation,
// which builds every value afresh. Error texts included.
func checkMemoAgrees(t *testing.T, cp *CompiledPolicy, req *Request) {
	t.Helper()
	st := newEvalState(req)
	defer st.release()
	for _, rule := range cp.rules {
		for _, prg := range []cel.Program{rule.tracked, rule.fast, rule.residual} {
			if prg == nil {
				continue
			}
			o1, _, e1 := prg.Eval((*activation)(req))
			o2, _, e2 := prg.Eval(st)
			if fmt.Sprint(o1, e1) != fmt.Sprint(o2, e2) {
				t.Fatalf("rule %q (%s) on %+v: fresh %v, %v; memoised %v, %v",
					rule.name, matchOf(cp, rule.name), req, o1, e1, o2, e2)
			}
		}
	}
}

func matchOf(cp *CompiledPolicy, name string) string {
	for _, r := range cp.src.Rules {
		if r.Name == name {
			return r.Match
		}
	}
	return ""
}

func TestPrefixSetLookup(t *testing.T) {
	b := newPrefixBuilder(5)
	for i, k := range []string{"/a", "/a/b", "/ab", "/b", ""} {
		b.add(k, i)
	}
	s := buildPrefixSet(b)
	none := newBitset(5)
	cases := map[string][]int{
		"/a/b/c": {0, 1, 4}, "/a/c": {0, 4}, "/abc": {0, 2, 4}, "/b": {3, 4}, "/": {4}, "": {4}, "/aa": {0, 4},
	}
	for path, want := range cases {
		ev := &evaluation{req: &Request{}}
		got := members(s.lookup(path, none, ev))
		ev.release()
		if !slices.Equal(got, want) {
			t.Errorf("lookup(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestRangeSetLookup(t *testing.T) {
	ranges := []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.2.0.0/16", "::/0", "2001:db8::/32", "0.0.0.0/0"}
	b := newRangeBuilder(len(ranges))
	for i, s := range ranges {
		b.add(netip.MustParsePrefix(s), i)
	}
	s := buildRangeSet(b)
	none := newBitset(len(ranges))
	cases := map[string][]int{
		"10.1.2.3": {0, 1, 2, 6}, "10.1.3.3": {0, 1, 6}, "10.2.0.0": {0, 3, 6}, "11.0.0.0": {6},
		"2001:db8::1": {4, 5}, "::1": {4}, "9.255.255.255": {6},
	}
	for addr, want := range cases {
		ev := &evaluation{req: &Request{}}
		got := members(s.lookup(netip.MustParseAddr(addr), none, ev))
		ev.release()
		if !slices.Equal(got, want) {
			t.Errorf("lookup(%s) = %v, want %v", addr, got, want)
		}
	}
}

func members(b bitset) []int {
	var out []int
	words := b[b.sums():]
	for i := range len(words) * 64 {
		if words[i/64]&(1<<(uint(i)%64)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// TestIndexUsesConstraints guards the index against silently indexing
// nothing: typical firewall rules must be skipped without evaluation.
func TestIndexUsesConstraints(t *testing.T) {
	p := testPolicy("allow", "deny",
		rule("a", 1, "deny", `inIpRange(request.source_ip, '10.0.0.0/8') && request.method == 'GET'`),
		rule("b", 2, "deny", `request.host in ['x.example', 'y.example'] && request.path.startsWith('/admin')`),
		rule("c", 3, "deny", `cidr('2001:db8::/32').containsIP(ip(request.source_ip))`),
		rule("d", 4, "deny", `request.principal == 'eve'`),
	)
	cp := mustCompile(t, p, DefaultOptions())
	cases := []struct {
		req  Request
		want []int
	}{
		{Request{SourceIP: "10.1.1.1", Method: "GET"}, []int{0, 3}},
		{Request{SourceIP: "10.1.1.1", Method: "POST"}, []int{3}},
		{Request{SourceIP: "192.0.2.1", Host: "x.example", Path: "/admin/1"}, []int{1, 3}},
		{Request{SourceIP: "2001:db8::1", Host: "x.example", Path: "/"}, []int{2, 3}},
		{Request{SourceIP: "not-an-ip"}, []int{2, 3}}, // c would error, not be false
	}
	for _, tc := range cases {
		got := candidateList(cp, &tc.req)
		if !slices.Equal(got, tc.want) {
			t.Errorf("candidates(%+v) = %v, want %v", tc.req, got, tc.want)
		}
	}
}

// candidateList returns the candidates of req in order.
func candidateList(cp *CompiledPolicy, req *Request) []int {
	ev := &evaluation{cp: cp, req: req}
	defer ev.release()
	var got []int
	var c cursor
	cp.index.candidates(&c, req, ev)
	for i := c.next(ev); i >= 0; i = c.next(ev) {
		got = append(got, i)
	}
	return got
}

// TestIndexUsesContainerConstraints: header and group tests skip rules
// exactly when the match is certainly false, and an unguarded header test
// keeps its rule when the header is missing (the match is an error then).
func TestIndexUsesContainerConstraints(t *testing.T) {
	p := testPolicy("allow", "deny",
		rule("guarded", 1, "deny", `'x-t' in request.headers && request.headers['x-t'] == 'a' && request.principal != 'z'`),
		rule("unguarded", 2, "deny", `request.headers['x-t'] in ['a', 'b']`),
		rule("presence", 3, "deny", `has(request.headers.tenant) && request.principal != 'z'`),
		rule("group", 4, "deny", `'admin' in request.groups && request.principal != 'z'`),
		rule("groups", 5, "deny", `('ops' in request.groups || 'admin' in request.groups)`),
		rule("other", 6, "deny", `request.principal == 'eve'`),
	)
	cp := mustCompile(t, p, DefaultOptions())
	many := strings.Split(strings.Repeat("g,", 100), ",")
	cases := []struct {
		req  Request
		want []int
	}{
		{Request{}, []int{1, 5}},
		{Request{Headers: PairsOf(map[string]string{"x-t": "a"})}, []int{0, 1, 5}},
		{Request{Headers: PairsOf(map[string]string{"x-t": "b"})}, []int{1, 5}},
		{Request{Headers: PairsOf(map[string]string{"x-t": "c", "tenant": ""})}, []int{2, 5}},
		{Request{Groups: []string{"ops"}}, []int{1, 4, 5}},
		{Request{Groups: []string{"x", "admin"}, Headers: PairsOf(map[string]string{"x-t": "z"})}, []int{3, 4, 5}},
		{Request{Groups: many}, []int{1, 3, 4, 5}}, // 'g' in groups could hit the cost limit
	}
	for _, tc := range cases {
		if got := candidateList(cp, &tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("candidates(%+v) = %v, want %v", tc.req, got, tc.want)
		}
	}
	// unguarded and groups are exact: decided without CEL when known.
	req := &Request{Headers: PairsOf(map[string]string{"x-t": "b"})}
	if d := cp.Evaluate(req); d.Rule != "unguarded" || d.Error != "" {
		t.Errorf("Evaluate(%+v) = %+v", req, d)
	}
	req = &Request{Groups: []string{"admin"}, Headers: PairsOf(map[string]string{})}
	if d := cp.Evaluate(req); d.Rule != "unguarded" || d.Error == "" {
		t.Errorf("Evaluate(%+v) = %+v, want the error of rule unguarded", req, d)
	}
}

func TestBitsetLayout(t *testing.T) {
	for n := range 70 * 64 {
		s, w := layout(n)
		b := newBitset(n)
		if b.sums() != s || len(b) != s+w {
			t.Fatalf("n=%d: sums()=%d, want %d (len %d)", n, b.sums(), s, len(b))
		}
	}
	b := newBitset(5000)
	b.set(4999)
	if got := members(b); !slices.Equal(got, []int{4999}) || b[4999/64/64]&(1<<(4999/64%64)) == 0 {
		t.Errorf("set(4999): members %v, summary %x", got, b[:b.sums()])
	}
}

// TestIndexEquivalenceManyHeaders covers the runs of missing header names
// (rangeTable): policies testing up to 30 header names, requests carrying
// none to a few of them, so the header term combines long runs of absent
// names, guarded, unguarded and presence-only.
func TestIndexEquivalenceManyHeaders(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	policies, requests := 100, 150
	if testing.Short() || raceEnabled {
		policies = 20
	}
	r := rand.New(rand.NewPCG(20261121, 9))
	names := make([]string, 30)
	for i := range names {
		names[i] = fmt.Sprintf("x-h%02d", i)
	}
	for i := range policies {
		p := genPolicy(r, 1+r.IntN(70))
		for j := range p.Rules {
			if r.IntN(4) == 0 {
				continue
			}
			name := pick(r, names[:5+r.IntN(len(names)-4)])
			var parts []string
			switch r.IntN(3) {
			case 0:
				parts = []string{genHeaderValueTest(r, name)}
			case 1:
				parts = []string{genHeaderPresence(r, name), genHeaderValueTest(r, name)}
			default:
				parts = []string{genHeaderPresence(r, name)}
			}
			p.Rules[j].Match = nest(r, append(parts, "("+p.Rules[j].Match+")"))
		}
		indexed := mustCompile(t, p, DefaultOptions())
		opts := DefaultOptions()
		opts.DisableIndex = true
		plain := mustCompile(t, p, opts)
		for range requests {
			req := genRequest(r)
			if n := r.IntN(4); n > 0 {
				h := req.Headers.Map()
				if h == nil {
					h = map[string]string{}
				}
				for range n {
					h[pick(r, names)] = pick(r, append(genHeaderValues, "zzz"))
				}
				req.Headers = PairsOf(h)
			}
			if want, got := plain.Evaluate(req), indexed.Evaluate(req); got != want {
				t.Fatalf("policy %d, request %+v:\nindexed %+v\nplain   %+v\nrules:\n%s", i, req, got, want, ruleDump(p))
			}
			checkSkipped(t, indexed, req)
		}
	}
}
