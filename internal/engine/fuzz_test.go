package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// FuzzCompile feeds untrusted match expressions to Compile. Nothing may
// panic; an accepted rule must decide identically with and without the
// index on a sample of requests. Seeds: testdata/fuzz/FuzzCompile.
func FuzzCompile(f *testing.F) {
	for _, m := range []string{
		`request.method == 'GET'`,
		`inIpRange(request.source_ip, '10.0.0.0/8') && request.path.startsWith('/a')`,
		`cidr('2001:db8::/32').containsIP(ip(request.source_ip)) || request.host in ['a', 'b']`,
		`request.headers['x'].matches('^a+$') && request.groups.exists(g, g == 'x')`,
		`'x-t' in request.headers && request.headers['x-t'] == 'a' && 'admin' in request.groups`,
		`request.headers.tenant in ['a', 'b'] && ('g' in request.groups || 'a' in request.groups)`,
		`has(request.headers.tenant) && inIpRange(request.source_ip, '10.0.0.0/8')`,
	} {
		f.Add(m)
	}
	reqs := genRequests(24)
	f.Fuzz(func(t *testing.T, match string) {
		p := testPolicy("allow", "skip",
			rule("fuzz", 1, "deny", match),
			rule("after", 2, "deny", `request.method == 'POST'`))
		indexed, err := Compile(p, DefaultOptions())
		if err != nil {
			var list policy.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is not a policy.ErrorList: %v", err)
			}
			return
		}
		plain := mustCompile(t, p, Options{DisableIndex: true})
		for _, r := range reqs {
			if got, want := indexed.Evaluate(r), plain.Evaluate(r); got != want {
				t.Fatalf("match %q on %+v: indexed %+v, plain %+v", match, r, got, want)
			}
		}
	})
}

// FuzzDecodeRequest feeds untrusted bodies to DecodeRequest: no panic,
// every error wraps ErrBadRequest, and an accepted request survives a JSON
// round trip unchanged. Seeds: testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"method":"GET","path":"/","source_ip":"10.0.0.1","headers":{"A":"b"}}`))
	f.Add([]byte(`{"attributes":{"a":[1,{"b":null}]},"time":"2024-01-01T00:00:00Z"}`))
	cp := mustCompile(f, genPolicy(rand.New(rand.NewPCG(1, 1)), 20), DefaultOptions())
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeRequest(data)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error does not wrap ErrBadRequest: %v", err)
			}
			return
		}
		first, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := DecodeRequest(first)
		if err != nil {
			t.Fatalf("round trip of %s: %v", first, err)
		}
		second, _ := json.Marshal(again)
		if !bytes.Equal(first, second) {
			t.Fatalf("round trip changed the request:\n%s\n%s", first, second)
		}
		cp.Evaluate(req)
	})
}
