package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"

	"github.com/policyrollout/reconciler/internal/policy"
)

// CompiledPolicy is a policy whose rules are type-checked, cost-checked and
// planned CEL programs, in evaluation order, with the rule index. It is
// immutable and safe for concurrent use.
type CompiledPolicy struct {
	src      *policy.Policy
	resource string // "policies/{name}"
	etag     string
	deflt    Verdict
	onError  policy.OnError
	rules    []compiledRule // in (priority, name) order
	index    *ruleIndex     // nil when Options.DisableIndex
	// costLimit is Options.RuntimeCostLimit: a rule's behaviour on a
	// costly request depends on it (see NewDelta).
	costLimit uint64
	// maxRuleCost is Options.MaxRuleCost, which decides whether a rule
	// compiles at all (see CompileBeside).
	maxRuleCost uint64
	// cons are each rule's index constraints, kept so that a Delta can
	// index the few rules an experiment changed.
	cons [][]constraint
	// lists are the named lists the rules use, compiled and shared.
	lists *policyLists
}

// compiledRule is one rule ready to evaluate.
type compiledRule struct {
	name     string
	verdict  Verdict
	priority int64
	match    string // the source, to recognise the same rule in two policies
	// tracked counts cost and stops at Options.RuntimeCostLimit.
	tracked cel.Program
	// fast is the same plan without cost tracking, which triples the speed
	// of a typical match. It is used only for requests within the sizes the
	// compile-time estimate assumed, where the cost cannot exceed that
	// estimate and so not the run-time limit either; nil when the estimate
	// itself is above the limit.
	fast cel.Program
	// residual is fast without the rule's index constraints, for when the
	// index has found them all true; nil unless they are all exact.
	residual cel.Program
	// exact: the rule's match is exactly its index constraints (see
	// constraint.exact), so the index alone decides it.
	exact bool
	// size is what the match compiles to, charged against the program
	// budgets (progbudget.go).
	size programSize
	// guards are the match's list tests that a request must pass for the
	// rule to be evaluated at all (listguard.go).
	guards []listGuard
	// native evaluates the match without cel-go where it can (native.go);
	// nil when some part of the match is not covered.
	native natBool
}

// Name returns the policy's name (the directory name, not the resource name).
func (cp *CompiledPolicy) Name() string { return cp.src.Name }

// Etag returns the etag of the policy source the program was compiled from.
func (cp *CompiledPolicy) Etag() string { return cp.etag }

// Source returns the policy the program was compiled from. Callers must
// not modify it: it is shared by every evaluation.
func (cp *CompiledPolicy) Source() *policy.Policy { return cp.src }

// Compile type-checks and plans every rule of p. Every problem is
// collected: the error is a policy.ErrorList with one entry per bad rule
// (and per bad policy-level setting), each naming the file, line and rule.
func Compile(p *policy.Policy, opts Options) (*CompiledPolicy, error) {
	return CompileBeside(p, opts, nil)
}

// CompileBeside is Compile for a policy that differs from base in a few
// rules, as an experiment differs from its live policy: a rule whose match
// is the text of a rule of base takes that rule's programs and index
// constraints instead of compiling its own. Both depend on nothing but the
// match and the budgets, so base is used only when it was compiled under
// the same budgets; a nil base makes it Compile. Every rule is still
// checked (action, duplicates), and the result decides exactly as
// Compile's would (TestCompileBesideEquivalence).
func CompileBeside(p *policy.Policy, opts Options, base *CompiledPolicy) (*CompiledPolicy, error) {
	return compilePolicy(p, opts, base, nil)
}

// compilePolicy is CompileBeside with p's matches parsed and measured
// already when parsed is not nil (compileTree measures a whole tree
// against its budgets before it compiles any policy).
func compilePolicy(p *policy.Policy, opts Options, base *CompiledPolicy, parsed []parsedMatch) (*CompiledPolicy, error) {
	opts = opts.withDefaults()
	etag := p.Etag() // of the policy as given, whatever lists it is lent
	p = withBaseLists(p, base)
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("engine: building the CEL environment: %w", err)
	}
	if opts.lists, err = compileLists(p, opts.FindList); err != nil {
		return nil, policy.ErrorList{{File: homeFile(p), Msg: err.Error()}}
	}
	cp := &CompiledPolicy{src: p, resource: "policies/" + p.Name, etag: etag, costLimit: opts.RuntimeCostLimit,
		maxRuleCost: opts.MaxRuleCost, lists: opts.lists}
	errs := cp.settings()
	rules := sortedRules(p.Rules)
	errs = append(errs, duplicateRules(rules)...)
	cons := make([][]constraint, len(rules))
	shared := sharedPrograms(base, opts, p.Lists)
	if parsed == nil {
		var over *policy.Error
		if parsed, over = measure(env, p.Name, rules, shared, nil, opts); over == errAbortedMeasure {
			return nil, ErrAborted
		} else if over != nil {
			// Over a program budget: nothing is compiled, which is
			// what would cost.
			return nil, append(errs, over)
		}
	}
	for i := range rules {
		if opts.aborted() {
			return nil, ErrAborted
		}
		cr, c, err := shared.compileRule(env, &rules[i], parsed[i], opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if rules[i].Preview {
			// Compiled so that a broken preview rule fails validation like
			// any other, but never part of the decision: the preview
			// runtime evaluates the policy with it enforced, off the live
			// path (preview.PreviewRules).
			continue
		}
		cp.rules = append(cp.rules, cr)
		cons[len(cp.rules)-1] = c
	}
	if len(errs) > 0 {
		return nil, errs
	}
	cp.cons = cons[:len(cp.rules)]
	if !opts.DisableIndex {
		cp.index = buildIndex(cp.cons, cp.rules)
	}
	return cp, nil
}

// withBaseLists gives a policy the lists of base it names without their
// data: an experiment's policy reaches nodes through the raft log as
// JSON, which carries each list's hash, not its data (policy.List), and
// the live generation beside it has the data of the lists it shares. A
// policy with no lists at all (one built by hand, or from an API body)
// is given the live ones.
func withBaseLists(p *policy.Policy, base *CompiledPolicy) *policy.Policy {
	if base == nil || len(base.src.Lists) == 0 {
		return p
	}
	c := *p
	if p.Lists == nil {
		c.Lists = base.src.Lists
		return &c
	}
	c.Lists = make(policy.Lists, len(p.Lists))
	for name, l := range p.Lists {
		if b := base.src.Lists[name]; l.Data == nil && b != nil && b.Hash == l.Hash && b.Kind == l.Kind {
			l = b
		}
		c.Lists[name] = l
	}
	return &c
}

// settings checks the policy-level keys that decide outcomes; the policy
// package validates them too, but a hand-built Policy must not slip through.
func (cp *CompiledPolicy) settings() policy.ErrorList {
	p := cp.src
	var errs policy.ErrorList
	v, ok := verdictOf(p.DefaultAction)
	if !ok {
		errs = append(errs, &policy.Error{File: homeFile(p), Msg: fmt.Sprintf(
			`default_action must be "allow" or "deny", not %q`, p.DefaultAction)})
	}
	cp.deflt = v
	cp.onError = p.OnError
	switch p.OnError {
	case "":
		cp.onError = policy.OnErrorDeny
	case policy.OnErrorDeny, policy.OnErrorAllow, policy.OnErrorSkip:
	default:
		errs = append(errs, &policy.Error{File: homeFile(p), Msg: fmt.Sprintf(
			`on_error must be "deny", "allow" or "skip", not %q`, p.OnError)})
	}
	return errs
}

// homeFile is where policy-level problems are reported: policy.toml.
func homeFile(p *policy.Policy) string {
	for _, s := range p.Sources {
		if s == "policy.toml" || strings.HasSuffix(s, "/policy.toml") {
			return s
		}
	}
	return p.Name + "/policy.toml"
}

// sortedRules copies the rules into evaluation order. The policy package
// sorts already; sorting again keeps the contract for hand-built policies.
func sortedRules(in []policy.Rule) []policy.Rule {
	rules := slices.Clone(in)
	slices.SortStableFunc(rules, func(a, b policy.Rule) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Name, b.Name))
	})
	return rules
}

func duplicateRules(rules []policy.Rule) policy.ErrorList {
	var errs policy.ErrorList
	seen := make(map[string]policy.Pos, len(rules))
	for _, r := range rules {
		if prev, dup := seen[r.Name]; dup {
			errs = append(errs, ruleError(&r, "is defined twice (also at %s:%d)", prev.File, prev.Line))
			continue
		}
		seen[r.Name] = r.Pos
	}
	return errs
}

// compileRule turns one rule into a program and its index constraints,
// taking them from reuse when it has the rule's match.
func (reuse shared) compileRule(env *cel.Env, r *policy.Rule, parsed parsedMatch, opts Options) (compiledRule, []constraint, *policy.Error) {
	v, ok := verdictOf(r.Action)
	if !ok {
		return compiledRule{}, nil, ruleError(r, `action must be "allow" or "deny", not %q`, r.Action)
	}
	if strings.TrimSpace(r.Match) == "" {
		return compiledRule{}, nil, ruleError(r, "match must not be empty")
	}
	if cr, cons, ok := reuse.lookup(r.Match); ok {
		cr.name, cr.verdict, cr.priority = r.Name, v, r.Priority
		return cr, cons, nil
	}
	if parsed.iss.Err() != nil {
		return compiledRule{}, nil, ruleError(r, "match: %s", issueText(parsed.iss))
	}
	a, iss := env.Check(parsed.ast)
	if iss.Err() != nil {
		return compiledRule{}, nil, ruleError(r, "match: %s", issueText(iss))
	}
	if probs := checkListCalls(a.NativeRep(), opts.lists, r.Match); len(probs) > 0 {
		return compiledRule{}, nil, ruleError(r, "match: %s", strings.Join(probs, "; "))
	}
	if !a.OutputType().IsExactType(cel.BoolType) {
		return compiledRule{}, nil, ruleError(r, "match must be a bool expression, not %s", a.OutputType())
	}
	est, err := checkCost(env, a, opts.MaxRuleCost)
	if err != nil {
		return compiledRule{}, nil, ruleError(r, "match: %v", err)
	}
	cr := compiledRule{name: r.Name, verdict: v, priority: r.Priority, match: r.Match, size: parsed.size}
	var sh shape
	hoisted := a
	// A rule that may legitimately reach the run-time limit is evaluated
	// whenever its turn comes, so that the limit fires exactly as it would
	// without the index.
	if est <= opts.RuntimeCostLimit {
		sh = analyze(a.NativeRep().Expr())
		cr.guards = listGuards(a.NativeRep().Expr(), opts.lists)
		cr.native = nativePlan(a.NativeRep().Expr(), opts.lists)
		if hoisted, err = hoist(env, a, sh); err == nil {
			err = cr.planFast(env, a, hoisted, sh, opts.lists.funcs)
		}
	}
	if err == nil {
		cr.tracked, err = env.Program(hoisted, cel.CostLimit(opts.RuntimeCostLimit), cel.EvalOptions(cel.OptOptimize), literalRegexes, opts.lists.funcs)
	}
	if err != nil {
		return compiledRule{}, nil, ruleError(r, "match: %v", err)
	}
	return cr, sh.cons, nil
}

// planFast plans the untracked programs: the hoisted match and, for a rule
// whose constraints are all exact, the residual match without them.
func (cr *compiledRule) planFast(env *cel.Env, a, hoisted *cel.Ast, sh shape, listFuncs cel.ProgramOption) error {
	cr.exact = sh.exact()
	var err error
	if cr.fast, err = env.Program(hoisted, cel.EvalOptions(cel.OptOptimize), literalRegexes, listFuncs); err != nil || !sh.residual() {
		return err
	}
	rest, err := keepConjuncts(env, a, sh.rest)
	if err != nil {
		return err
	}
	cr.residual, err = env.Program(rest, cel.EvalOptions(cel.OptOptimize), literalRegexes, listFuncs)
	return err
}

// issueText renders CEL's errors on one line each, as "line:column: message"
// within the match, without the ASCII-art snippet meant for terminals.
func issueText(iss *cel.Issues) string {
	var parts []string
	for _, e := range iss.Errors() {
		parts = append(parts, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
	}
	return strings.Join(parts, "; ")
}

func ruleError(r *policy.Rule, format string, args ...any) *policy.Error {
	return &policy.Error{
		File: r.Pos.File, Line: r.Pos.Line, Rule: r.Name,
		Msg: fmt.Sprintf("rule %q: ", r.Name) + fmt.Sprintf(format, args...),
	}
}

// verdictOf maps a policy action to the verdict the API reports.
func verdictOf(a policy.Action) (Verdict, bool) {
	switch a {
	case policy.ActionAllow:
		return Allow, true
	case policy.ActionDeny:
		return Deny, true
	}
	return "", false
}
