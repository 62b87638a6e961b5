package engine

import (
	"regexp/syntax"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Budgets on the compiled size of regexes, summed. MaxRegexProgramSize
// bounds one regex, but a policy within every byte budget can hold
// thousands of them: 1,000 rules of twelve `[a-z]{40,200}` patterns each
// (626 KB) took a validating process past 1 GiB and allocated 7.3 GB, since
// every rule's regexes are compiled into several programs. The sums are in
// RE2 program instructions, as Go's regexp counts them; the example tree
// uses a few hundred. docs/policy-language.md documents both.
const (
	// MaxPolicyRegexInsts bounds the instructions of all the regexes of
	// one policy: a generation's policy, or one experiment's.
	MaxPolicyRegexInsts = 100_000
	// MaxTreeRegexInsts bounds them over a whole tree: a generation, or
	// the experiments of one branch or pull request together.
	MaxTreeRegexInsts = 400_000
)

// regexInsts is the size of pattern's RE2 program, compiled as Go's
// regexp compiles it. A pattern that does not parse counts zero: the
// regex validator reports it.
func regexInsts(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// matchRegexInsts sums the program sizes of the matches() patterns of a
// checked match (the validator made them all literals).
func matchRegexInsts(a *cel.Ast) int {
	n := 0
	for _, call := range ast.MatchDescendants(ast.NavigateAST(a.NativeRep()), ast.FunctionMatcher("matches")) {
		args := call.AsCall().Args()
		if p := args[len(args)-1]; p.Kind() == ast.LiteralKind {
			s, _ := p.AsLiteral().Value().(string)
			n += regexInsts(s)
		}
	}
	return n
}

// regexTally counts a tree's regex instructions across its policies;
// the zero value is a fresh tree.
type regexTally struct{ insts int }

// regexBudget charges the rules of one policy against the policy's and
// (if tree is set) the tree's budget, before their programs are built: the
// programs are what costs the memory.
type regexBudget struct {
	policyName string
	insts      int
	tree       *regexTally
	over       bool // a budget was crossed: compiling more is pointless
}

// charge adds rule r's n instructions, or says which budget r crossed.
func (b *regexBudget) charge(r *policy.Rule, n int) *policy.Error {
	b.insts += n
	if b.insts > MaxPolicyRegexInsts {
		b.over = true
		return ruleError(r, "the regexes of policy %q compile to more than %d instructions (%d with this rule); "+
			"use fewer or simpler regexes (a list of words is cheaper as `in [...]`)", b.policyName, MaxPolicyRegexInsts, b.insts)
	}
	if b.tree == nil {
		return nil
	}
	b.tree.insts += n
	if b.tree.insts > MaxTreeRegexInsts {
		b.over = true
		return ruleError(r, "the regexes of the whole tree compile to more than %d instructions (%d with this rule of policy %q); "+
			"use fewer or simpler regexes", MaxTreeRegexInsts, b.tree.insts, b.policyName)
	}
	return nil
}
