package sandbox

import (
	"bytes"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// FuzzReadRequest: whatever arrives on the child's stdin, readRequest
// returns an error or a request (a tree, or a policy to check), without
// a panic, and a request it returns encodes back to one that decodes the
// same.
func FuzzReadRequest(f *testing.F) {
	var ok bytes.Buffer
	_ = writeRequest(&ok, request{Files: map[string][]byte{"p/policy.toml": []byte("default_action = \"allow\"\n")},
		Load: policy.LoadOptions{MergeDefault: policy.StrategyFail}, Engine: engine.DefaultOptions()})
	f.Add(ok.Bytes())
	for _, h := range []string{`{"Files":["a"]}`, `{"Files":null,"Engine":{"MaxRuleCost":-1}}`,
		`{"Policy":{"name":"web","default_action":"deny","rules":[{"name":"a","priority":1,"action":"allow","match":"true"}],` +
			`"tests":[{"name":"t","request":{"path":"/","attributes":{"n":[1,{"x":null}]}},"expect":"allow"}]}}`} {
		var b bytes.Buffer
		_ = writeFrame(&b, []byte(h))
		_ = writeFrame(&b, []byte("!!"))
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := readRequest(bytes.NewReader(in))
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := writeRequest(&again, req); err != nil {
			t.Fatal(err)
		}
		back, err := readRequest(&again)
		if err != nil || len(back.Files) != len(req.Files) || back.Load != req.Load || back.Engine != req.Engine ||
			(back.Policy == nil) != (req.Policy == nil) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, req)
		}
		if req.Policy != nil && back.Policy.Etag() != req.Policy.Etag() {
			t.Fatalf("policy round trip: %s, want %s", back.Policy.Canonical(), req.Policy.Canonical())
		}
	})
}
