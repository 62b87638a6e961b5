package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// regexBomb is the attack that passed every byte budget: rules of twelve
// patterns each, 626 KB for 1,000 rules, which took a validating process
// past 1 GiB and allocated 7.3 GB.
func regexBomb(rules int) string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n")
	for i := range rules {
		var m []string
		for j := range 12 {
			m = append(m, fmt.Sprintf("request.path.matches('^/%d[a-z]{40,200}K%d')", i, j))
		}
		fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"deny\"\nmatch = '''%s'''\n", i, i+1, strings.Join(m, " || "))
	}
	return b.String()
}

// TestRegexBudgetStopsTheBomb: the bomb is refused with the policy's
// file, the rule that crossed the budget and the budget named, and the
// refusal allocates a bounded amount (bytes allocated do not depend on
// the machine's speed).
func TestRegexBudgetStopsTheBomb(t *testing.T) {
	if n := regexInsts("^/1[a-z]{40,200}K1"); n < 200 {
		t.Fatalf("the bomb's pattern compiles to %d instructions; the test assumes hundreds", n)
	}
	files := map[string][]byte{"web/policy.toml": []byte(regexBomb(1_000))}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := ValidateTree(files, policy.LoadOptions{}, DefaultOptions())
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of policy: %d MiB allocated", len(files["web/policy.toml"]), alloc>>20)
	if v.Valid() || len(v.Problems) != 1 {
		t.Fatalf("problems %v", v.Problems)
	}
	e := v.Problems[0]
	if e.File != "web/policy.toml" || e.Rule == "" || !strings.Contains(e.Msg, "more than 100000 instructions") {
		t.Fatalf("problem %#v", e)
	}
	if alloc > 1<<30 {
		t.Errorf("refusing the bomb allocated %d MiB", alloc>>20)
	}
}

// TestRegexBudgetCoversTheTree: policies each within their budget are
// refused together once the tree's sum is over its own.
func TestRegexBudgetCoversTheTree(t *testing.T) {
	per := regexInsts("^/1[a-z]{40,200}K1")
	rules := MaxPolicyRegexInsts / (12 * per) // just under a policy's budget
	files := map[string][]byte{}
	policies := MaxTreeRegexInsts/(rules*12*per) + 1
	for i := range policies {
		files[fmt.Sprintf("p%d/policy.toml", i)] = []byte(regexBomb(rules))
	}
	one := ValidateTree(map[string][]byte{"p0/policy.toml": files["p0/policy.toml"]}, policy.LoadOptions{}, DefaultOptions())
	if !one.Valid() {
		t.Fatalf("one policy under its budget: %v", one.Problems)
	}
	v := ValidateTree(files, policy.LoadOptions{}, DefaultOptions())
	if v.Valid() || !strings.Contains(v.Problems.Error(), "the regexes of the whole tree compile to more than 400000 instructions") {
		t.Fatalf("%d policies of %d rules: %v", policies, rules, v.Problems)
	}
	// A policy compiled alone (an API experiment) has only its own budget.
	if _, err := Compile(one.Policies[0].Source(), DefaultOptions()); err != nil {
		t.Fatal(err)
	}
}

// TestRegexBudgetBesideAgrees: a rule reused from the live policy is
// charged as if compiled, so Compile and CompileBeside refuse alike.
func TestRegexBudgetBesideAgrees(t *testing.T) {
	live, err := policy.LoadPolicy(policy.TreeFS(map[string][]byte{"web/policy.toml": []byte(regexBomb(15))}), "web", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := mustCompile(t, live, DefaultOptions())
	exp, err := policy.LoadPolicy(policy.TreeFS(map[string][]byte{"web/policy.toml": []byte(regexBomb(100))}), "web", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, alone := Compile(exp, DefaultOptions())
	_, beside := CompileBeside(exp, DefaultOptions(), base)
	var l1, l2 policy.ErrorList
	if !errors.As(alone, &l1) || !errors.As(beside, &l2) || l1.Error() != l2.Error() {
		t.Fatalf("alone: %v\nbeside: %v", alone, beside)
	}
}

// TestExampleTreeWithinProgramBudgets logs how far the example tree is from
// the budgets, which the documentation quotes.
func TestExampleTreeWithinProgramBudgets(t *testing.T) {
	files := map[string][]byte{}
	root := "../../policies.example"
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	v := ValidateTree(files, policy.LoadOptions{}, DefaultOptions())
	if !v.Valid() {
		t.Fatal(v.Problems)
	}
	var total programSize
	for _, cp := range v.Policies {
		for _, r := range cp.rules {
			total.add(r.size)
		}
	}
	t.Logf("the example tree: %d expression nodes (budgets: %d a policy, %d a tree), regexes of %d instructions (budgets: %d, %d)",
		total.nodes, MaxPolicyExprNodes, MaxTreeExprNodes, total.insts, MaxPolicyRegexInsts, MaxTreeRegexInsts)
	if total.insts == 0 || total.nodes == 0 {
		t.Fatal("the example's matches were not measured")
	}
}

// denseRules is a policy of n rules, each a list literal of 4,000
// elements: about 4,000 expression nodes in 8 KB of text, the densest
// a match can be within the parser's nesting limit.
func denseRules(n int) string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n")
	list := "[" + strings.Repeat("1,", 3_999) + "1]"
	for i := range n {
		fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"deny\"\nmatch = 'request.path == \"/%d\" && size(%s) > 0'\n", i, i+1, i, list)
	}
	return b.String()
}

// TestExpressionNodeBudgets: a policy within every byte budget whose
// matches are dense list literals is refused at the rule that crosses the
// policy's node budget; policies each within theirs are refused together
// once the tree's sum is over its own.
func TestExpressionNodeBudgets(t *testing.T) {
	t.Parallel() // CPU-bound and independent: with -race it is most of the package's time
	v := ValidateTree(map[string][]byte{"web/policy.toml": []byte(denseRules(70))}, policy.LoadOptions{}, DefaultOptions())
	if v.Valid() || len(v.Problems) != 1 || v.Problems[0].Rule == "" ||
		!strings.Contains(v.Problems[0].Msg, "more than 250000 expression nodes") {
		t.Fatalf("70 dense rules: %v", v.Problems)
	}
	files := map[string][]byte{}
	for i := range 3 {
		files[fmt.Sprintf("p%d/policy.toml", i)] = []byte(denseRules(45))
	}
	v = ValidateTree(files, policy.LoadOptions{}, DefaultOptions())
	if v.Valid() || !strings.Contains(v.Problems.Error(), "the matches of the whole tree have more than 500000 expression nodes") {
		t.Fatalf("3 policies of 45 dense rules: %v", v.Problems)
	}
	// Each alone is within the budgets (measured, not compiled: compiling
	// 180,000 nodes takes seconds).
	one, err := policy.LoadPolicy(policy.TreeFS(map[string][]byte{"p0/policy.toml": files["p0/policy.toml"]}), "p0", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, over := measureTree([]*policy.Policy{one}); over != nil {
		t.Fatalf("one policy of 45 dense rules: %v", over)
	}
}
