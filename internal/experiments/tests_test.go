package experiments

import (
	"context"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

const soloTOML = `default_action = "deny"

[[rules]]
name = "allow-get"
priority = 100
action = "allow"
match = "request.method == 'GET'"

[[tests]]
name = "get is allowed"
request = { method = "GET" }
expect = "allow"

[[tests]]
name = "post is denied"
request = { method = "POST" }
expect = "deny"
`

// activeSolo is a store whose active generation holds the policy solo
// with two tests.
func activeSolo(t *testing.T) *leadertest.Store {
	t.Helper()
	store := leadertest.NewStore()
	files := map[string][]byte{"solo/policy.toml": []byte(soloTOML)}
	p, err := policy.LoadPolicy(policy.TreeFS(files), "solo", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, cmd := range []raftstore.Payload{
		&raftstore.StageGeneration{Generation: 1, Commit: "c1", Files: files, Etags: map[string]string{"solo": p.Etag()}},
		&raftstore.ActivateGeneration{Generation: 1},
	} {
		if _, err := store.Propose(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// Issue 24, finding 2: a create body without tests gets the live
// policy's, an update body without them keeps the experiment's, and only
// "tests": [] removes them.
func TestExperimentKeepsTestsLeftOut(t *testing.T) {
	store := activeSolo(t)
	s := New(Config{Store: store, Leader: leadingHere{}, Logger: testlog.New(t),
		Now: func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }})
	ctx := context.Background()
	rulesOnly := func(tests []policy.Test) preview.Input {
		p := &policy.Policy{DefaultAction: policy.ActionDeny, Group: "default", OnError: policy.OnErrorDeny, Tests: tests,
			Rules: []policy.Rule{{Name: "allow-get", Priority: 100, Action: policy.ActionAllow, Match: "request.method in ['GET', 'HEAD']"}}}
		return preview.Input{Policy: p}
	}
	testsOf := func(name string) []string {
		e, err := preview.Get(s.List(), name)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tt := range e.Policy.Tests {
			out = append(out, tt.Name)
		}
		return out
	}
	if _, err := s.CreateExperiment(ctx, "policies/solo", "kept", rulesOnly(nil)); err != nil {
		t.Fatal(err)
	}
	if got := testsOf("policies/solo/experiments/kept"); len(got) != 2 {
		t.Fatalf("tests of a body without tests: %q, want the live policy's two", got)
	}
	if _, err := s.CreateExperiment(ctx, "policies/solo", "none", rulesOnly([]policy.Test{})); err != nil {
		t.Fatal(err)
	}
	if got := testsOf("policies/solo/experiments/none"); len(got) != 0 {
		t.Fatalf("tests of a body with tests: []: %q", got)
	}
	one := []policy.Test{{Name: "head", Request: map[string]any{"method": "HEAD"}, Expect: policy.ActionAllow}}
	if _, err := s.UpdateExperiment(ctx, "policies/solo/experiments/none", rulesOnly(one)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateExperiment(ctx, "policies/solo/experiments/none", rulesOnly(nil)); err != nil {
		t.Fatal(err)
	}
	if got := testsOf("policies/solo/experiments/none"); len(got) != 1 || got[0] != "head" {
		t.Fatalf("an update without tests changed them to %q", got)
	}
	live := s.livePolicy(store.State(), "solo")
	kept, _ := preview.Get(s.List(), "policies/solo/experiments/kept")
	none, _ := preview.Get(s.List(), "policies/solo/experiments/none")
	if n := *testsRemoved(live, kept.Policy); n != 0 {
		t.Errorf("committing kept removes %d tests", n)
	}
	if n := *testsRemoved(live, none.Policy); n != 2 {
		t.Errorf("committing none removes %d tests, want 2", n)
	}
}
