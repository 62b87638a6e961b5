package preview_test

import (
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
)

// The body of GET /v1/policies/{policy} names the lists the policy uses;
// it is accepted unchanged as an experiment's policy (AIP-203: output-only
// fields are ignored).
func TestParseInputAcceptsTheLiveLists(t *testing.T) {
	in, err := preview.ParseInput([]byte(`{"policy":{"name":"policies/edge","etag":"e","generation":1,"commit":"c","default_action":"allow","group":"default","on_error":"deny","rules":[],` +
		`"lists":[{"name":"tor-exit","file":"_lists/tor-exit.netset","kind":"ip","entries":2,"etag":"x"}]}}`))
	if err != nil || in.Policy == nil || in.Policy.Name != "edge" || len(in.Policy.Lists) != 0 {
		t.Fatalf("ParseInput: %v, %+v", err, in.Policy)
	}
}
