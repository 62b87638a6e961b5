package sandbox_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/sandbox"
	"github.com/policyrollout/reconciler/test/harness"
)

// A worker's long-lived child answers what a fresh child answers, over a
// sequence of changes to a large list (derived from the content before,
// or not) and invalid trees between them.
func TestWorkerMatchesAFreshChild(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t)
	w := &sandbox.Worker{Runner: sandbox.Runner{Path: bin}}
	defer w.Close()
	big := mixedCIDRs(60_000)
	steps := map[string][]byte{
		"1 list":          big,
		"2 one more":      append(append([]byte{}, big...), "192.0.2.0/24\n"...),
		"3 malformed":     append(append([]byte{}, big...), "192.0.2.0/33\n"...),
		"4 removed":       big[:len(big)-40],
		"5 list again":    big,
		"6 over a budget": []byte(strings.Repeat("10.0.0.1\n", policy.MaxListEntries+1)),
		"7 one more":      append(append([]byte{}, big...), "198.51.100.7\n"...),
	}
	for _, name := range []string{"1 list", "2 one more", "3 malformed", "4 removed", "5 list again", "6 over a budget", "7 one more"} {
		files := listTree(t, steps[name])
		want := sandbox.Runner{Path: bin}.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
		got := w.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the worker's verdict differs:\n got  %.600q\n want %.600q", name, got.Problems, want.Problems)
		}
		t.Logf("%s: %d problems", name, len(want.Problems))
	}
}

// A worker whose child is killed by its memory limit gives the verdict a
// fresh child gives (the budget named), and the next tree is validated
// in a new child.
func TestWorkerSurvivesAKilledChild(t *testing.T) {
	t.Parallel()
	w := &sandbox.Worker{Runner: sandbox.Runner{Path: harness.Binary(t), MemoryLimit: 32 << 20}}
	defer w.Close()
	example := exampleTree(t)
	for i, files := range []map[string][]byte{example, heavyTree(), example} {
		v := w.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
		heavy := i == 1
		if heavy != (len(v.Problems) == 1 && strings.HasPrefix(v.Problems[0], sandbox.BudgetMessage)) ||
			!heavy && len(v.Problems) > 0 {
			t.Fatalf("tree %d: verdict %+v", i, v)
		}
	}
}
