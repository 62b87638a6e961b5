package engine

import (
	"fmt"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Resident bytes a compiled program keeps per unit of its size, measured
// on this engine (TestSizeBytesCalibration: live heap after a collection,
// programs held): about 265 bytes an expression node (prefix tests, long
// lists of strings), and about 130 bytes an RE2 instruction (rules of
// twelve `[a-z]{40,200}` patterns). They are rounded up, so that a budget
// in bytes errs on the side of the node.
const (
	BytesPerExprNode  = 384
	BytesPerRegexInst = 160
)

// Size is what compiled programs hold: the expression nodes of their
// matches and the RE2 instructions of their regexes (the measures of the
// program budgets, progbudget.go).
type Size struct {
	ExprNodes  int `json:"exprNodes"`
	RegexInsts int `json:"regexInsts"`
}

// Add returns s plus o.
func (s Size) Add(o Size) Size {
	return Size{ExprNodes: s.ExprNodes + o.ExprNodes, RegexInsts: s.RegexInsts + o.RegexInsts}
}

// Bytes estimates the resident memory of programs of size s.
func (s Size) Bytes() int64 {
	return int64(s.ExprNodes)*BytesPerExprNode + int64(s.RegexInsts)*BytesPerRegexInst
}

// CompileWithin is CompileBeside for a caller that holds many programs
// under one budget, as a node holds its experiments: it parses p's
// matches, measures what compiling p beside base adds (the rules whose
// programs base does not hold already), and asks admit. When admit
// refuses, nothing is compiled and admit's error is returned: refusing
// costs a parse. The added size is returned either way.
func CompileWithin(p *policy.Policy, opts Options, base *CompiledPolicy, admit func(Size) error) (*CompiledPolicy, Size, error) {
	env, err := celEnv()
	if err != nil {
		return nil, Size{}, fmt.Errorf("engine: building the CEL environment: %w", err)
	}
	rules := sortedRules(p.Rules)
	reuse := sharedPrograms(base, opts.withDefaults(), p.Lists)
	parsed, over := measure(env, p.Name, rules, reuse, nil, opts)
	if over == errAbortedMeasure {
		return nil, Size{}, ErrAborted
	}
	if over != nil {
		return nil, Size{}, policy.ErrorList{over}
	}
	var added Size
	for i := range rules {
		if _, _, ok := reuse.lookup(rules[i].Match); !ok {
			added = added.Add(Size{ExprNodes: parsed[i].size.nodes, RegexInsts: parsed[i].size.insts})
		}
	}
	if err := admit(added); err != nil {
		return nil, added, err
	}
	if opts.aborted() {
		return nil, added, ErrAborted
	}
	cp, err := compilePolicy(p, opts, base, parsed)
	return cp, added, err
}
