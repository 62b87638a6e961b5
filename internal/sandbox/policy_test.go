package sandbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/sandbox"
	"github.com/policyrollout/reconciler/test/harness"
)

// examplePolicy is the example edge-firewall policy as the API receives
// one: decoded from JSON, so without file positions.
func examplePolicy(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.LoadPolicy(os.DirFS("../../policies.example"), "edge-firewall", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var api policy.Policy
	if err := json.Unmarshal(b, &api); err != nil {
		t.Fatal(err)
	}
	api.Lists = p.Lists // the leader gives an API experiment the live lists, with their data
	return &api
}

// heavyPolicy is one policy of n rules of 12 prefix tests each: about
// 40 KiB of compiled programs a rule, and 530 bytes of canonical JSON (so
// at most about 1,450 rules fit a policy's 768 KiB).
func heavyPolicy(n int) *policy.Policy {
	p := &policy.Policy{Name: "heavy", DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny}
	for r := range n {
		terms := make([]string, 12)
		for k := range terms {
			terms[k] = fmt.Sprintf("request.path.startsWith('/r%d/x%d')", r, k)
		}
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("r%d", r), Priority: int64(r + 1),
			Action: policy.ActionDeny, Match: strings.Join(terms, " || ")})
	}
	return p
}

// TestCheckPolicyMatchesInProcess: the child answers what
// preview.CheckPolicy answers in-process, for a policy that compiles and
// for one that does not (same code, same message).
func TestCheckPolicyMatchesInProcess(t *testing.T) {
	r := sandbox.Runner{Path: harness.Binary(t)}
	valid := examplePolicy(t)
	invalid := examplePolicy(t)
	invalid.Rules = append(invalid.Rules, policy.Rule{Name: "broken", Priority: 1, Action: policy.ActionDeny, Match: "request.nope("})
	if err := r.CheckPolicy(valid, engine.DefaultOptions()); err != nil {
		t.Fatalf("the example policy in the child: %v", err)
	}
	want := preview.CheckPolicy(invalid, engine.DefaultOptions())
	got := r.CheckPolicy(invalid, engine.DefaultOptions())
	if want == nil || got == nil || got.Error() != want.Error() || !errors.Is(got, preview.ErrInvalidArgument) {
		t.Fatalf("a policy that does not compile:\n child      %v\n in-process %v", got, want)
	}
	if err := r.CheckPolicy(nil, engine.DefaultOptions()); !errors.Is(err, preview.ErrInvalidArgument) {
		t.Fatalf("no policy: %v", err)
	}
}

// TestCheckPolicyKilledByMemoryLimit: a policy that needs more memory to
// compile than the child may have is RESOURCE_EXHAUSTED naming the
// budget, the parent allocating only the policy's encoding; with the
// default limit the same policy compiles.
func TestCheckPolicyKilledByMemoryLimit(t *testing.T) {
	bin := harness.Binary(t)
	p := heavyPolicy(1400)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// 16 MiB, not 32: the heavy policy's peak varies with the collector's
	// timing, and at 32 MiB one run in a few compiled within it.
	err := sandbox.Runner{Path: bin, MemoryLimit: 16 << 20}.CheckPolicy(p, engine.DefaultOptions())
	runtime.ReadMemStats(&after)
	if code, _ := errs.CodeOf(err); code != errs.ResourceExhausted || !strings.Contains(err.Error(), sandbox.BudgetMessage) {
		t.Fatalf("CheckPolicy = %v, want RESOURCE_EXHAUSTED naming %q", err, sandbox.BudgetMessage)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%v; the parent allocated %d KiB", err, allocated>>10)
	if allocated > 64<<20 {
		t.Fatalf("the parent allocated %d MiB while the child compiled", allocated>>20)
	}
	if err := (sandbox.Runner{Path: bin}).CheckPolicy(p, engine.DefaultOptions()); err != nil {
		t.Fatalf("the heavy policy with the default limit: %v", err)
	}
}

// TestCheckPolicyKilledByDeadline: a check still running at its deadline
// is RESOURCE_EXHAUSTED naming the budget.
func TestCheckPolicyKilledByDeadline(t *testing.T) {
	err := sandbox.Runner{Path: harness.Binary(t), Timeout: time.Nanosecond}.CheckPolicy(heavyPolicy(1400), engine.DefaultOptions())
	if code, _ := errs.CodeOf(err); code != errs.ResourceExhausted || !strings.Contains(err.Error(), sandbox.BudgetMessage) {
		t.Fatalf("CheckPolicy = %v, want RESOURCE_EXHAUSTED naming %q", err, sandbox.BudgetMessage)
	}
	t.Log(err)
}

// TestCheckPolicyWithoutAWorker: a binary that is not a reconciler is an
// internal error, neither a verdict on the policy nor a budget.
func TestCheckPolicyWithoutAWorker(t *testing.T) {
	err := sandbox.Runner{Path: "/bin/true"}.CheckPolicy(examplePolicy(t), engine.DefaultOptions())
	if code, ok := errs.CodeOf(err); err == nil || ok {
		t.Fatalf("CheckPolicy = %v (code %v), want an error without a code", err, code)
	}
}

// BenchmarkCheckPolicy compares checking the example policy in-process
// with checking it in a child (a process start per check).
func BenchmarkCheckPolicy(b *testing.B) {
	p := examplePolicy(b)
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			if err := preview.CheckPolicy(p, engine.DefaultOptions()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("child", func(b *testing.B) {
		r := sandbox.Runner{Path: harness.Binary(b)}
		for b.Loop() {
			if err := r.CheckPolicy(p, engine.DefaultOptions()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
