package engine

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
)

// TestMapIterationUnderCostLimit: a comprehension over headers that stops
// at its first match costs what the match's position makes it cost, so
// under a tight cost limit the decision used to depend on Go's random map
// order (about 40% errors for this request). Iteration is in key order,
// so every evaluation, of one request or of freshly built equal ones, must
// give the same decision: the match sorting first is found within the
// limit, the match sorting last is not.
func TestMapIterationUnderCostLimit(t *testing.T) {
	const match = `request.headers.exists(k, k.startsWith('x-') && request.headers[k].size() > 3)`
	p := testPolicy("allow", "skip", rule("scan", 1, "deny", match))
	// A full scan of the 41 headers costs about 500; the limit stops it
	// around the 15th header.
	cp := mustCompile(t, p, Options{RuntimeCostLimit: 200})
	for _, tc := range []struct {
		key     string
		verdict Verdict
		err     string
	}{
		{"x-a", Deny, ""},
		{"x-z", Allow, "cost limit exceeded"},
	} {
		r := rand.New(rand.NewPCG(7, 7))
		shared := &Request{Headers: costlyHeaders(r, tc.key)}
		first := cp.Evaluate(shared)
		if first.Verdict != tc.verdict || !errorMatches(first.Error, tc.err) {
			t.Fatalf("match at %q: got %+v, want %s with error %q", tc.key, first, tc.verdict, tc.err)
		}
		for i := range 200 {
			req := shared
			if i%2 == 1 {
				req = &Request{Headers: costlyHeaders(r, tc.key)}
			}
			if got := cp.Evaluate(req); got != first {
				t.Fatalf("match at %q, evaluation %d: got %+v, first was %+v", tc.key, i, got, first)
			}
		}
	}
}

// costlyHeaders is 40 headers x-k00... with short values and the header
// match with a long one, inserted in random order.
func costlyHeaders(r *rand.Rand, match string) Pairs {
	names := []string{match}
	for i := range 40 {
		names = append(names, fmt.Sprintf("x-k%02d", i))
	}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	h := make(map[string]string, len(names))
	for _, n := range names {
		h[n] = "abc" // not longer than 3: no match
	}
	h[match] = "long-value"
	return PairsOf(h)
}

// unbudgeted accepts rules over dyn values, whose estimates are unbounded.
var unbudgeted = Options{MaxRuleCost: math.MaxUint64}

// sortedMatches reach the maps of a request built by shuffledRequest in
// every way a rule can: the map fields, maps nested in attributes directly
// or in lists, the request used as a value. %s is the sorted keys.
var sortedMatches = []string{
	"request.headers.map(k, k) == %s",
	"request.query.filter(k, true) == %s",
	"request.attributes.nested.map(k, k) == %s",
	"request.attributes['nested'].map(k, k) == %s",
	"request.attributes.deep.nested.map(k, k) == %s",
	"request.attributes.list[1].map(k, k) == %s",
	"request.attributes.list.exists(m, m.map(k, k) == %s)",
	"request.attributes.deep.list.map(m, m.map(k, k))[1] == %s",
	"dyn(request).headers.map(k, k) == %s",
	"dyn(request).attributes.nested.map(k, k) == %s",
	"[request][0].query.map(k, k) == %s",
	"dyn(request.attributes.nested).map(k, k) == %s",
}

// TestMapIterationSorted: every map of the request iterates in ascending
// key order, which map() makes visible; with Go's order, 12 keys would
// come out sorted by chance about once in 12 evaluations.
func TestMapIterationSorted(t *testing.T) {
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	sorted := "['" + strings.Join(keys, "', '") + "']"
	r := rand.New(rand.NewPCG(3, 3))
	for _, m := range sortedMatches {
		match := fmt.Sprintf(m, sorted)
		cp := mustCompile(t, testPolicy("deny", "deny", rule("sorted", 1, "allow", match)), unbudgeted)
		prg := cp.rules[0].tracked
		for range 20 {
			req := shuffledRequest(r, keys)
			if got := cp.Evaluate(req); got.Verdict != Allow || got.Error != "" {
				t.Errorf("%s: got %+v", match, got)
				break
			}
			if out, _, err := prg.Eval((*activation)(req)); out != types.True || err != nil {
				t.Errorf("%s on a fresh activation: %v, %v", match, out, err)
				break
			}
		}
	}
}

// shuffledRequest has maps with the given keys, inserted in random order,
// everywhere sortedMatches look.
func shuffledRequest(r *rand.Rand, keys []string) *Request {
	stringMap := func() map[string]string {
		m := map[string]string{}
		for _, i := range r.Perm(len(keys)) {
			m[keys[i]] = "v"
		}
		return m
	}
	anyMap := func() map[string]any {
		m := map[string]any{}
		for _, i := range r.Perm(len(keys)) {
			m[keys[i]] = "v"
		}
		return m
	}
	return &Request{Headers: PairsOf(stringMap()), Query: PairsOf(stringMap()), Attributes: map[string]any{
		"nested": anyMap(),
		"list":   []any{"x", anyMap()},
		"deep":   map[string]any{"nested": anyMap(), "list": []any{anyMap(), anyMap()}},
	}}
}

// TestSortedMapKeepsMapSemantics: the wrapper changes the order only.
// Lookups, presence, size, equality (with literals, between the fields
// and for the request as a value) and errors are cel-go's.
func TestSortedMapKeepsMapSemantics(t *testing.T) {
	req := &Request{
		Headers:    PairsOf(map[string]string{"a": "1", "b": "2"}),
		Query:      PairsOf(map[string]string{"a": "1", "b": "2"}),
		Attributes: map[string]any{"m": map[string]any{"x": 1.0, "y": 2.0}, "n": nil},
	}
	for match, want := range map[string]string{
		"request.headers['a'] == '1' && request.headers.b == '2'":                          "ALLOW",
		"'a' in request.headers && !('c' in request.headers)":                              "ALLOW",
		"has(request.headers.a) && !has(request.headers.c)":                                "ALLOW",
		"size(request.headers) == 2 && request.attributes.m.size() == 2":                   "ALLOW",
		"request.headers == {'b': '2', 'a': '1'} && {'a': '1', 'b': '2'} == request.query": "ALLOW",
		"request.headers == request.query && request.headers != {'a': '1'}":                "ALLOW",
		"request.attributes.m == {'y': 2, 'x': 1} && request.attributes.n == null":         "ALLOW",
		"has(request.attributes.m.x) && !has(request.attributes.m.z)":                      "ALLOW",
		"dyn(request) == dyn(request) && [request] == [request]":                           "ALLOW",
		"type(request.headers) == map && type(request.attributes.m) == map":                "ALLOW",
		"request.headers['c'] == '3'":                                                      "DENY no such key: c",
		"request.attributes.m.all(k, request.attributes.m[k] > 'a')":                       "DENY no such overload",
	} {
		cp := mustCompile(t, testPolicy("deny", "deny", rule("r", 1, "allow", match)), unbudgeted)
		d := cp.Evaluate(req)
		got := string(d.Verdict)
		if d.Error != "" {
			got += " " + d.Error
		}
		verdict, detail, _ := strings.Cut(want, " ")
		if string(d.Verdict) != verdict || !strings.Contains(got, detail) {
			t.Errorf("%s: got %q, want %q", match, got, want)
		}
	}
}

// TestSortedMapFoldAndIterator: Fold (which comprehensions use, with keys
// only or with values) and Iterator visit the keys in ascending order,
// stop when told to, and sort once per map.
func TestSortedMapFoldAndIterator(t *testing.T) {
	raw := map[string]string{"b": "2", "a": "1", "c": "3"}
	m := newSortedMap(types.NewStringStringMap(types.DefaultTypeAdapter, raw))
	var keys []string
	for it := m.Iterator(); it.HasNext() == types.True; {
		keys = append(keys, string(it.Next().(types.String)))
	}
	if want := slices.Sorted(maps.Keys(raw)); !slices.Equal(keys, want) {
		t.Fatalf("Iterator: %v, want %v", keys, want)
	}
	first := &m.keys[0]
	all := &testFolder{}
	m.Fold(all)
	if want := []string{"a=1", "b=2", "c=3"}; !slices.Equal(all.seen, want) {
		t.Errorf("Fold with values: %v, want %v", all.seen, want)
	}
	two := &testFolder{keysOnly: true, limit: 2}
	m.Fold(two)
	if want := []string{"a=<nil>", "b=<nil>"}; !slices.Equal(two.seen, want) {
		t.Errorf("Fold of keys, stopped after two: %v, want %v", two.seen, want)
	}
	if &m.keys[0] != first {
		t.Error("the keys were sorted again")
	}
}

// testFolder records what Fold hands it, as "key=value".
type testFolder struct {
	keysOnly bool
	limit    int // stop after this many entries; 0: never
	seen     []string
}

func (f *testFolder) FoldKeyOnly() bool { return f.keysOnly }

func (f *testFolder) FoldEntry(key, val any) bool {
	f.seen = append(f.seen, fmt.Sprintf("%v=%v", key, val))
	return f.limit == 0 || len(f.seen) < f.limit
}

// BenchmarkMapAccess is one rule reading headers the common ways, which
// sortedMap must leave as fast as before, and iterating them, which pays
// for sorting (once per map and evaluation).
func BenchmarkMapAccess(b *testing.B) {
	req := &Request{Principal: "alice", Headers: PairsOf(map[string]string{
		"user-agent": "Mozilla/5.0", "accept": "*/*", "cf-ipcountry": "FR", "x-tenant": "t1", "cookie": "a=b"})}
	for name, match := range map[string]string{
		"index":  "request.headers['user-agent'] == 'bot' || request.principal == 'bob'",
		"in":     "'x-token' in request.headers || request.principal == 'bob'",
		"has":    "has(request.headers.authorization) || request.principal == 'bob'",
		"size":   "size(request.headers) > 32 || request.principal == 'bob'",
		"exists": "request.headers.exists(k, k.startsWith('x-api')) || request.principal == 'bob'",
	} {
		cp := mustCompile(b, testPolicy("allow", "deny", rule("r", 1, "deny", match)), DefaultOptions())
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := cp.Evaluate(req); d.Rule != "" {
					b.Fatal(d)
				}
			}
		})
	}
}
