package engine

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
)

// hoist rewrites a match so that its indexed conjuncts are evaluated first,
// in field order, followed by the others in their written order. && is
// commutative in CEL (a false conjunct wins over an error), so the value is
// unchanged; what changes is that a conjunct the index finds false is
// reached before any costly conjunct, so evaluation stops where the index
// would have skipped the rule instead of possibly hitting the cost limit.
func hoist(env *cel.Env, a *cel.Ast, sh shape) (*cel.Ast, error) {
	if len(sh.cons) == 0 {
		return a, nil
	}
	return keepConjuncts(env, a, sh.order())
}

// keepConjuncts rebuilds the top-level && chain of a from the conjuncts
// with the given ids, in that order; the optimizer type-checks the result.
func keepConjuncts(env *cel.Env, a *cel.Ast, ids []int64) (*cel.Ast, error) {
	all := conjuncts(a.NativeRep().Expr(), nil)
	if sameOrder(all, ids) {
		return a, nil
	}
	opt, err := cel.NewStaticOptimizer(reorderConjuncts{order: ids})
	if err != nil {
		return nil, err
	}
	out, iss := opt.Optimize(env, a)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return out, nil
}

func sameOrder(all []ast.Expr, ids []int64) bool {
	if len(all) != len(ids) {
		return false
	}
	for i, e := range all {
		if e.ID() != ids[i] {
			return false
		}
	}
	return true
}

// reorderConjuncts rebuilds the top-level && chain in the given order.
type reorderConjuncts struct{ order []int64 }

// Optimize implements cel.ASTOptimizer.
func (r reorderConjuncts) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	byID := map[int64]ast.Expr{}
	for _, c := range conjuncts(a.Expr(), nil) {
		byID[c.ID()] = c
	}
	var chain ast.Expr
	for _, id := range r.order {
		if chain == nil {
			chain = byID[id]
			continue
		}
		chain = ctx.NewCall(operators.LogicalAnd, chain, byID[id])
	}
	return ctx.NewAST(chain)
}
