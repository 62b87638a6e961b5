package experiments

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// leadingHere is a Leader whose loop runs here and that adds no
// validation; its other methods are not used by create and update.
type leadingHere struct{ Leader }

func (leadingHere) Leading() bool { return true }

func (leadingHere) WithValidation(e *preview.Experiment) *preview.Experiment { return e }

// apiPolicy is a small policy an API client might submit.
func apiPolicy() *policy.Policy {
	return &policy.Policy{DefaultAction: policy.ActionAllow, Rules: []policy.Rule{
		{Name: "admin", Priority: 1, Action: policy.ActionDeny, Match: `request.path.startsWith("/admin")`}}}
}

// TestAPIPolicyCheckedByConfiguredChecker (issue 16): the policy of an
// experiment created or updated through the API is checked by
// Config.CheckPolicy (`reconciler serve`: the sandbox child), named after
// its parent, never compiled here first; the checker's error (a child
// killed by its budget) is the method's, and nothing is stored.
func TestAPIPolicyCheckedByConfiguredChecker(t *testing.T) {
	store := leadertest.NewStore()
	budget := &preview.Error{Code: preview.ResourceExhausted, Msg: "validation exceeded its memory/time budget"}
	var checked []string
	var verdict error
	s := New(Config{Store: store, Leader: leadingHere{}, Logger: testlog.New(t), EngineOptions: engine.DefaultOptions(),
		CheckPolicy: func(p *policy.Policy, _ engine.Options) error {
			checked = append(checked, p.Name)
			return verdict
		}})
	ctx := context.Background()

	verdict = budget
	if _, err := s.CreateExperiment(ctx, "policies/web", "heavy", preview.Input{Policy: apiPolicy()}); !errors.Is(err, budget) {
		t.Fatalf("create with a checker that refuses: %v, want %v", err, budget)
	}
	if store.Total() != 0 {
		t.Fatalf("%d proposals for a refused create", store.Total())
	}
	verdict = nil
	if _, err := s.CreateExperiment(ctx, "policies/web", "light", preview.Input{Policy: apiPolicy()}); err != nil {
		t.Fatalf("create: %v", err)
	}
	verdict = budget
	if _, err := s.UpdateExperiment(ctx, "policies/web/experiments/light", preview.Input{Policy: apiPolicy()}); !errors.Is(err, budget) {
		t.Fatalf("update with a checker that refuses: %v, want %v", err, budget)
	}
	if want := []string{"web", "web", "web"}; !slices.Equal(checked, want) {
		t.Fatalf("checked %q, want %q", checked, want)
	}
}

// TestAPIPolicyCheckedInProcessByDefault: without a checker (a test
// binary cannot run the sandbox child) the service compiles in-process,
// and a policy that does not compile is INVALID_ARGUMENT.
func TestAPIPolicyCheckedInProcessByDefault(t *testing.T) {
	s := New(Config{Store: leadertest.NewStore(), Leader: leadingHere{}, Logger: testlog.New(t), EngineOptions: engine.DefaultOptions()})
	bad := apiPolicy()
	bad.Rules[0].Match = "request.nope("
	_, err := s.CreateExperiment(context.Background(), "policies/web", "bad", preview.Input{Policy: bad})
	if !errors.Is(err, preview.ErrInvalidArgument) {
		t.Fatalf("create with a policy that does not compile: %v", err)
	}
}
