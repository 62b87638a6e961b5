package experiments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// leadingHere is a Leader whose loop runs here, that adds no validation
// and whose sources hold files; its other methods are not used by
// create, update and the sync of branches.
type leadingHere struct {
	Leader
	files map[string][]byte
}

func (l leadingHere) SourceFiles(_, _ string) (map[string][]byte, string, error) {
	return l.files, "", nil
}

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

// TestBranchPolicyCheckedByConfiguredCheckerOnce (issue 16): the policy
// a branch changes is checked by Config.CheckPolicy (the sandbox child)
// before it becomes an experiment, not compiled here: a branch whose
// policy exceeds the child's budget gets no experiment, and the next
// passes do not run that child again for the same version; a new version
// is checked anew.
func TestBranchPolicyCheckedByConfiguredCheckerOnce(t *testing.T) {
	store := leadertest.NewStore()
	leader := leadingHere{files: map[string][]byte{"web/policy.toml": []byte(leadertest.WebPolicy("heavy")["web/policy.toml"])}}
	checks := 0
	verdict := error(&preview.Error{Code: preview.ResourceExhausted, Msg: "validation exceeded its memory/time budget"})
	s := New(Config{Store: store, Leader: &leader, Logger: testlog.New(t), EngineOptions: engine.DefaultOptions(),
		CheckPolicy: func(*policy.Policy, engine.Options) error { checks++; return verdict }})
	change := []Change{{Policies: []string{"web"}, Main: "main-sha",
		Source: preview.Source{Kind: preview.SourceBranch, Branch: "heavy", HeadCommit: "head-1"}}}
	ctx := context.Background()
	for range 3 {
		if err := s.SyncBranches(ctx, change, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if checks != 1 || len(s.List()) != 0 {
		t.Fatalf("%d checks and %d experiments after three passes over a refused policy, want 1 and 0", checks, len(s.List()))
	}
	leader.files = map[string][]byte{"web/policy.toml": []byte(leadertest.WebPolicy("light")["web/policy.toml"])}
	verdict = nil
	if err := s.SyncBranches(ctx, change, nil, 0); err != nil {
		t.Fatal(err)
	}
	if checks != 2 || len(s.List()) != 1 {
		t.Fatalf("%d checks and %d experiments after the branch's new version, want 2 and 1", checks, len(s.List()))
	}
}

// TestAPIPolicyChecksBounded (issue 16): at most maxAPIChecks policy
// checks (children of up to [validation] memory_limit_bytes each) run at
// once; one more waits for a slot while its request lasts, and a request
// that ends first is UNAVAILABLE without running its check.
func TestAPIPolicyChecksBounded(t *testing.T) {
	var mu sync.Mutex
	running, over := 0, false
	release := make(chan struct{})
	s := New(Config{Store: leadertest.NewStore(), Leader: leadingHere{}, Logger: testlog.New(t), EngineOptions: engine.DefaultOptions(),
		CheckPolicy: func(*policy.Policy, engine.Options) error {
			mu.Lock()
			running++
			past := running > maxAPIChecks
			over = over || past
			mu.Unlock()
			if !past {
				<-release
			}
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}})
	var wg sync.WaitGroup
	for i := range maxAPIChecks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateExperiment(context.Background(), "policies/web", fmt.Sprintf("e%d", i), preview.Input{Policy: apiPolicy()})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	leadertest.Eventually(t, "the first checks running", func() bool { mu.Lock(); defer mu.Unlock(); return running == maxAPIChecks })
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.CreateExperiment(gone, "policies/web", "late", preview.Input{Policy: apiPolicy()})
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if code, _ := errs.CodeOf(err); over || code != errs.Unavailable {
		t.Fatalf("a check past the bound: ran %t, answered %v", over, err)
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

// TestAPIPolicyHeldToThePolicyBudgets (issue 16): an experiment's policy
// is held to the budgets of a policy in a tree (rules, tests, size)
// before any compiler runs, child or not: 5,001 trivial rules, which
// compile cheaply and fit the request and raft limits, are refused
// INVALID_ARGUMENT naming the limit, and no check is started.
func TestAPIPolicyHeldToThePolicyBudgets(t *testing.T) {
	store := leadertest.NewStore()
	checks := 0
	s := New(Config{Store: store, Leader: leadingHere{}, Logger: testlog.New(t), EngineOptions: engine.DefaultOptions(),
		CheckPolicy: func(*policy.Policy, engine.Options) error { checks++; return nil }})
	p := &policy.Policy{DefaultAction: policy.ActionAllow}
	for i := range policy.MaxPolicyRules + 1 {
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("r%d", i), Priority: int64(i + 1), Action: policy.ActionDeny, Match: "true"})
	}
	_, err := s.CreateExperiment(context.Background(), "policies/web", "many", preview.Input{Policy: p})
	var pe *preview.Error
	if !errors.As(err, &pe) || pe.Code != preview.InvalidArgument || !strings.Contains(err.Error(), "5001 rules, over the limit of 5000") {
		t.Fatalf("create with %d rules: %v", len(p.Rules), err)
	}
	if strings.HasPrefix(pe.Msg, ":") {
		t.Errorf("message %q", pe.Msg)
	}
	if checks != 0 || store.Total() != 0 {
		t.Fatalf("%d checks and %d proposals for a policy over the budget", checks, store.Total())
	}
}
