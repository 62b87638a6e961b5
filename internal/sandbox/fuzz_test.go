package sandbox

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// FuzzReadRequest: whatever arrives on the child's stdin, readRequest
// returns an error or a request, without a panic, and a request it
// returns encodes back to one that decodes the same.
func FuzzReadRequest(f *testing.F) {
	ok, _ := json.Marshal(request{Files: map[string][]byte{"p/policy.toml": []byte("default_action = \"allow\"\n")},
		Load: policy.LoadOptions{MergeDefault: policy.StrategyFail}, Engine: engine.DefaultOptions()})
	f.Add(ok)
	f.Add([]byte(`{"Files":{"a":"!!"}}`))
	f.Add([]byte(`{"Files":null,"Engine":{"MaxRuleCost":-1}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := readRequest(bytes.NewReader(in))
		if err != nil {
			return
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := readRequest(bytes.NewReader(again))
		if err != nil || len(back.Files) != len(req.Files) || back.Load != req.Load || back.Engine != req.Engine {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, req)
		}
	})
}
