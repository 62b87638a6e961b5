package leadertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// WebPolicy is a valid tree whose rule names its version.
func WebPolicy(rule string) map[string]string {
	return map[string]string{"web/policy.toml": fmt.Sprintf(`default_action = "deny"
[[rules]]
name = %q
priority = 1
action = "allow"
match = 'request.path == "/%s"'
[[tests]]
name = "allowed"
request = { path = "/%s" }
expect = "allow"
`, rule, rule, rule)}
}

// eventuallyLimit bounds Eventually: a guard against a test that hangs,
// not a measurement. Under make test (the race detector, two packages at
// once on two cores) staging an 8 MiB tree in chunks took 8 s of the 10 s
// this was.
const eventuallyLimit = time.Minute

// Eventually waits until cond holds, failing the test after
// eventuallyLimit.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventuallyLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ready reports generation gen Ready for nodes, as their loaders would.
func Ready(t *testing.T, s *Store, gen uint64, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		if _, err := s.Propose(context.Background(), &raftstore.ReportReady{Generation: gen, NodeID: n}); err != nil {
			t.Fatal(err)
		}
	}
}
