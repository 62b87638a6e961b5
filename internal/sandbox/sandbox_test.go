package sandbox_test

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/sandbox"
	"github.com/policyrollout/reconciler/test/harness"
)

// exampleTree is the repository's example policies root.
func exampleTree(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := policy.ReadTree(os.DirFS("../../policies.example"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// heavyTree is within every budget (8,000 rules, 4.6 MB, 472,000 of the
// tree's 500,000 expression nodes) but takes about 320 MB to compile:
// what a small memory limit must stop.
func heavyTree() map[string][]byte {
	files := map[string][]byte{}
	for p := range 10 {
		var b strings.Builder
		b.WriteString("default_action = \"allow\"\n\n")
		for r := range 800 {
			terms := make([]string, 12)
			for k := range terms {
				terms[k] = fmt.Sprintf("request.path.startsWith('/p%d/r%d/x%d')", p, r, k)
			}
			fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"deny\"\nmatch = '''%s'''\n\n",
				r, r+1, strings.Join(terms, " || "))
		}
		files[fmt.Sprintf("p%d/policy.toml", p)] = []byte(b.String())
	}
	return files
}

// TestChildMatchesInProcess: the child's verdict is the in-process one,
// for a valid tree and for an invalid one (same problems, same etags).
func TestChildMatchesInProcess(t *testing.T) {
	r := sandbox.Runner{Path: harness.Binary(t)}
	valid := exampleTree(t)
	invalid := exampleTree(t)
	for name, b := range invalid {
		if strings.HasSuffix(name, "/policy.toml") {
			invalid[name] = append(append([]byte{}, b...), "\n[[rules]]\nname = \"broken\"\naction = \"deny\"\nmatch = 'request.nope('\n"...)
		}
	}
	for name, files := range map[string]map[string][]byte{"valid": valid, "invalid": invalid} {
		t.Run(name, func(t *testing.T) {
			want := reconcile.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
			got := r.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("child verdict differs:\n got  %+v\n want %+v", got, want)
			}
			if (name == "valid") != (len(got.Problems) == 0) || (name == "valid") != (len(got.Etags) > 0) {
				t.Fatalf("%s tree: problems %q, etags %v", name, got.Problems, got.Etags)
			}
		})
	}
}

// TestChildKilledByMemoryLimit: a tree that needs more memory than the
// child may have is INVALID with a message naming the budget, and the
// parent allocates only the tree's encoding, not what the child tried to
// use (validating this tree in-process takes about 320 MiB).
func TestChildKilledByMemoryLimit(t *testing.T) {
	bin := harness.Binary(t)
	files := heavyTree()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := sandbox.Runner{Path: bin, MemoryLimit: 32 << 20}.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	if len(v.Problems) != 1 || !strings.HasPrefix(v.Problems[0], sandbox.BudgetMessage) || len(v.Etags) != 0 {
		t.Fatalf("verdict = %+v, want one problem starting %q", v, sandbox.BudgetMessage)
	}
	t.Logf("problem: %s; the parent allocated %d KiB", v.Problems[0], allocated>>10)
	// The tree is 4.6 MB, its JSON 6.2 MB: the encoding and its buffers
	// take 30 to 50 MiB (more with -race), a third of what validating
	// would hold.
	if allocated > 128<<20 {
		t.Fatalf("the parent allocated %d MiB while the child validated", allocated>>20)
	}
	// The same tree is valid with the default memory budget: the limit,
	// not the tree, made it invalid. The deadline is raised: validating
	// the heavy tree takes 10 to 30 s under -race on a loaded 2-core
	// machine, and the deadline is not what this test is about.
	if v := (sandbox.Runner{Path: bin, Timeout: 3 * time.Minute}).Validate(files, policy.LoadOptions{}, engine.DefaultOptions()); len(v.Problems) != 0 {
		t.Fatalf("heavy tree with the default limit: %q", v.Problems)
	}
}

// TestChildKilledByDeadline: a child still working at its deadline is
// killed and the tree is INVALID, naming the budget.
func TestChildKilledByDeadline(t *testing.T) {
	v := sandbox.Runner{Path: harness.Binary(t), Timeout: 1}.Validate(heavyTree(), policy.LoadOptions{}, engine.DefaultOptions())
	if len(v.Problems) != 1 || !strings.HasPrefix(v.Problems[0], sandbox.BudgetMessage) {
		t.Fatalf("verdict = %+v, want one problem starting %q", v, sandbox.BudgetMessage)
	}
	t.Log(v.Problems[0])
}

// TestNotAReconciler: a binary that is not a reconciler gives an invalid
// verdict, not a crash or a valid one.
func TestNotAReconciler(t *testing.T) {
	v := sandbox.Runner{Path: "/bin/true"}.Validate(exampleTree(t), policy.LoadOptions{}, engine.DefaultOptions())
	if len(v.Problems) != 1 || !strings.HasPrefix(v.Problems[0], sandbox.BudgetMessage) {
		t.Fatalf("verdict = %+v", v)
	}
}
