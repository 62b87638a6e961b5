package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

func strPtr(s string) *string { return &s }

func TestRunTests(t *testing.T) {
	p := testPolicy("deny", "deny",
		rule("get", 1, "allow", `request.method == 'GET'`),
		rule("token", 2, "allow", `request.headers['x-token'] == 't'`))
	at := func(line int) policy.Pos { return policy.Pos{File: "p/tests/t.toml", Line: line} }
	p.Tests = []policy.Test{
		{Name: "get passes", Request: map[string]any{"method": "GET"}, Expect: "allow", Rule: strPtr("get"), Pos: at(1)},
		{Name: "any rule", Request: map[string]any{"method": "GET"}, Expect: "allow", Pos: at(2)},
		{Name: "wrong verdict", Request: map[string]any{"method": "PUT", "headers": map[string]any{"x-token": "no"}},
			Expect: "allow", Pos: at(3)},
		{Name: "wrong rule", Request: map[string]any{"method": "GET"}, Expect: "allow", Rule: strPtr("token"), Pos: at(4)},
		{Name: "default expected", Request: map[string]any{"method": "GET"}, Expect: "allow", Rule: strPtr(""), Pos: at(5)},
		{Name: "match error", Request: map[string]any{"method": "PUT"}, Expect: "allow", Pos: at(6)},
		{Name: "bad request", Request: map[string]any{"methd": "GET"}, Expect: "allow", Pos: at(7)},
		{Name: "bad expect", Request: map[string]any{}, Expect: "maybe", Pos: at(8)},
	}
	got := RunTests(mustCompile(t, p, DefaultOptions()))
	want := []struct {
		passed bool
		msg    string
	}{
		{true, ""},
		{true, ""},
		{false, `got DENY, want ALLOW (decided by the default action)`},
		{false, `decided by rule "get", want rule "token"`},
		{false, `decided by rule "get", want the default action`},
		{false, `got DENY, want ALLOW (decided by rule "token"); match error: rule "token": no such key: x-token`},
		{false, `invalid request: field "methd": unknown field`},
		{false, `expect must be "allow" or "deny", not "maybe"`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Passed != w.passed || !strings.HasPrefix(g.Message, w.msg) || w.msg == "" && g.Message != "" {
			t.Errorf("%s: passed=%v message=%q, want %v %q", g.Name, g.Passed, g.Message, w.passed, w.msg)
		}
		if g.Policy != "p" || g.Name != p.Tests[i].Name || g.Pos != p.Tests[i].Pos || g.Want != p.Tests[i].Expect {
			t.Errorf("%s: identity fields %+v", p.Tests[i].Name, g)
		}
	}
}

func TestBundle(t *testing.T) {
	a := testPolicy("allow", "deny", rule("r", 1, "deny", `request.method == 'DELETE'`))
	a.Name = "alpha"
	b := testPolicy("deny", "deny")
	b.Name = "beta"
	bundle, err := NewBundle([]*policy.Policy{b, a}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := bundle.Names(); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("Names = %v", got)
	}
	if got := bundle.Etags(); got["alpha"] != a.Etag() || got["beta"] != b.Etag() || len(got) != 2 {
		t.Errorf("Etags = %v", got)
	}
	if cp, ok := bundle.Policy("alpha"); !ok || cp.Source() != a {
		t.Errorf("Policy(alpha) = %v, %v", cp, ok)
	}
	d, err := bundle.Evaluate("alpha", &Request{Method: "DELETE"})
	if err != nil || d.Verdict != Deny || d.Rule != "r" || d.Policy != "policies/alpha" {
		t.Errorf("Evaluate = %+v, %v", d, err)
	}
	if _, err := bundle.Evaluate("gamma", &Request{}); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown policy: %v", err)
	}
	names := bundle.Names()
	names[0] = "mutated"
	if bundle.Names()[0] != "alpha" {
		t.Error("Names exposes the bundle's slice")
	}
}

func TestNewBundleCollectsErrors(t *testing.T) {
	a := testPolicy("allow", "deny", rule("bad", 1, "deny", `request.pth == 'x'`))
	a.Name = "alpha"
	b := testPolicy("allow", "deny", rule("worse", 2, "deny", `42`))
	b.Name = "beta"
	_, err := NewBundle([]*policy.Policy{a, b, a}, DefaultOptions())
	var list policy.ErrorList
	if !errors.As(err, &list) || len(list) != 3 {
		t.Fatalf("got %v, want 3 errors", err)
	}
	for _, want := range []string{`rule "bad"`, `rule "worse"`, `"alpha" appears twice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors do not mention %s:\n%v", want, err)
		}
	}
}

// TestBundleConcurrent evaluates one bundle from many goroutines; run with
// -race. Each goroutine checks its answers against a sequential baseline.
func TestBundleConcurrent(t *testing.T) {
	fw := firewallPolicy(200, 9)
	gen := genPolicy(rand.New(rand.NewPCG(5, 5)), 30)
	bundle, err := NewBundle([]*policy.Policy{fw, gen}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	reqs := append(fwRequests(64, 4), genRequests(64)...)
	type key struct {
		policy string
		req    int
	}
	want := map[key]Decision{}
	for _, name := range bundle.Names() {
		for i, r := range reqs {
			want[key{name, i}], _ = bundle.Evaluate(name, r)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 300 {
				name, i := bundle.Names()[(g+n)%2], (g*31+n)%len(reqs)
				got, err := bundle.Evaluate(name, reqs[i])
				if err != nil || got != want[key{name, i}] {
					errs <- fmt.Errorf("%s request %d: got %+v, %v; want %+v", name, i, got, err, want[key{name, i}])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func genRequests(n int) []*Request {
	r := rand.New(rand.NewPCG(6, 6))
	out := make([]*Request, n)
	for i := range out {
		out[i] = genRequest(r)
	}
	return out
}

// TestCompileConcurrent: nodes compile experiments while a generation is
// being compiled; the shared CEL environment must allow it (run with -race).
func TestCompileConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			p := genPolicy(rand.New(rand.NewPCG(uint64(g), 3)), 15)
			if _, err := Compile(p, DefaultOptions()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
