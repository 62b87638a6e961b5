package engine

import (
	"fmt"
	"regexp/syntax"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Budgets on the compiled size of programs, summed over a policy and over
// a tree (docs/policy-language.md documents them). The byte budgets bound
// the text, but compiling costs by what the text expands to: every rule is
// planned into several programs, each holding the expression and every
// regex it uses. Measured on this engine:
//
//   - expression nodes: about 4 KiB allocated and 700 bytes at the peak
//     per node; 3,200 rules of twelve prefix tests are 188,800 nodes
//     (724 MiB allocated while compiling them);
//   - regexes: 1,000 rules of twelve `[a-z]{40,200}` patterns (626 KB,
//     within every byte budget) are 4.4 million RE2 instructions, which
//     took a validating process past 1 GiB and allocated 7.3 GB.
//
// Both are counted from the parsed matches of the whole policy before
// any rule is type-checked or planned: a policy over a budget costs its
// parse, nothing more, and is refused naming the rule that crossed it.
const (
	// MaxPolicyExprNodes bounds the expression nodes of one policy's
	// matches: a generation's policy, or one experiment's.
	MaxPolicyExprNodes = 250_000
	// MaxTreeExprNodes bounds them over a whole tree: a generation, or
	// the experiments of one branch or pull request together.
	MaxTreeExprNodes = 500_000
	// MaxPolicyRegexInsts bounds the RE2 instructions of all the regexes
	// of one policy.
	MaxPolicyRegexInsts = 100_000
	// MaxTreeRegexInsts bounds them over a whole tree.
	MaxTreeRegexInsts = 400_000
)

// programSize is what one rule, a policy or a tree compiles to.
type programSize struct {
	nodes int // expression nodes of the checked matches
	insts int // RE2 instructions of their regexes
}

func (s *programSize) add(o programSize) { s.nodes += o.nodes; s.insts += o.insts }

// parsedMatch is a rule's match parsed, with what it will compile to.
type parsedMatch struct {
	ast  *cel.Ast
	iss  *cel.Issues
	size programSize
}

// measure parses the match of every rule of a policy and charges what
// each will compile to against the policy's budgets and tree's (when set).
// A rule whose match the live policy already compiled (shared) is not
// parsed but charged all the same, so that Compile and CompileBeside
// refuse alike. Parse errors are kept for compileRule to report.
func measure(env *cel.Env, name string, rules []policy.Rule, shared shared, tree *programSize, opts Options) ([]parsedMatch, *policy.Error) {
	b := programBudget{policyName: name, tree: tree}
	out := make([]parsedMatch, len(rules))
	for i := range rules {
		if opts.aborted() {
			return nil, errAbortedMeasure
		}
		r := &rules[i]
		if cr, _, ok := shared.lookup(r.Match); ok {
			out[i].size = cr.size
		} else if strings.TrimSpace(r.Match) != "" {
			out[i].ast, out[i].iss = env.Parse(r.Match)
			if out[i].iss.Err() == nil {
				out[i].size = sizeOf(out[i].ast)
			}
		}
		if err := b.charge(r, out[i].size); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errAbortedMeasure is what measure returns when Options.Abort stopped it;
// its callers answer ErrAborted.
var errAbortedMeasure = &policy.Error{Msg: ErrAborted.Error()}

// measureTree parses and measures every policy of a tree against the
// policy and tree budgets before any is compiled, in the order compiling
// takes them: the first rule over a budget is the one refused.
func measureTree(policies []*policy.Policy) ([][]parsedMatch, *policy.Error) {
	env, err := celEnv()
	if err != nil {
		return nil, &policy.Error{Msg: fmt.Sprintf("engine: building the CEL environment: %v", err)}
	}
	var tree programSize
	out := make([][]parsedMatch, len(policies))
	for i, p := range policies {
		parsed, over := measure(env, p.Name, sortedRules(p.Rules), shared{}, &tree, Options{})
		if over != nil {
			return nil, over
		}
		out[i] = parsed
	}
	return out, nil
}

// sizeOf measures a parsed match: its expression nodes and the program
// sizes of its literal matches() patterns (the validator refuses any
// other).
func sizeOf(a *cel.Ast) programSize {
	var s programSize
	all := ast.MatchDescendants(ast.NavigateAST(a.NativeRep()), func(ast.NavigableExpr) bool { return true })
	s.nodes = len(all)
	for _, e := range all {
		if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != "matches" {
			continue
		}
		args := e.AsCall().Args()
		if len(args) == 0 {
			continue // unchecked yet: `matches()` is the checker's to refuse
		}
		if p := args[len(args)-1]; p.Kind() == ast.LiteralKind {
			str, _ := p.AsLiteral().Value().(string)
			s.insts += regexInsts(str)
		}
	}
	return s
}

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

// programBudget charges the rules of one policy against the policy's
// budgets and, when tree is set, the tree's (a tree's policies share
// one): before a rule's programs are built, since they are what costs.
type programBudget struct {
	policyName string
	used       programSize
	tree       *programSize
}

// charge adds rule r's size, or says which budget r crossed.
func (b *programBudget) charge(r *policy.Rule, s programSize) *policy.Error {
	b.used.add(s)
	switch {
	case b.used.nodes > MaxPolicyExprNodes:
		return ruleError(r, "the matches of policy %q have more than %d expression nodes (%d with this rule); "+
			"simplify them or split the policy", b.policyName, MaxPolicyExprNodes, b.used.nodes)
	case b.used.insts > MaxPolicyRegexInsts:
		return ruleError(r, "the regexes of policy %q compile to more than %d instructions (%d with this rule); "+
			"use fewer or simpler regexes (a list of words is cheaper as `in [...]`)", b.policyName, MaxPolicyRegexInsts, b.used.insts)
	case b.tree == nil:
		return nil
	}
	b.tree.add(s)
	switch {
	case b.tree.nodes > MaxTreeExprNodes:
		return ruleError(r, "the matches of the whole tree have more than %d expression nodes (%d with this rule of policy %q)",
			MaxTreeExprNodes, b.tree.nodes, b.policyName)
	case b.tree.insts > MaxTreeRegexInsts:
		return ruleError(r, "the regexes of the whole tree compile to more than %d instructions (%d with this rule of policy %q); "+
			"use fewer or simpler regexes", MaxTreeRegexInsts, b.tree.insts, b.policyName)
	}
	return nil
}
