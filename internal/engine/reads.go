package engine

import (
	"slices"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
)

// The request fields whose values are read by name: a preview sample
// hides their values unless [preview] show names them (internal/preview).
var namedFields = []string{"attributes", "headers", "query"}

// ValueReads lists the values of headers, query parameters and attributes
// that match reads, sorted: "headers.x-api-key" (header names lower-cased,
// as requests carry them), "query.token", "attributes.tenant" (the
// top-level attribute), or the bare field ("headers") when match reads
// values by a key computed at run time, iterates over keys and values, or
// hands the whole map or request to something else. Name tests read no
// value: 'k' in request.headers, has(request.headers.k), size(), and a
// one-variable comprehension over the keys. It walks cel-go's parsed AST
// (ast.NavigateAST) in the environment of every match; a comprehension
// variable named request counts as reading every field. A match that does
// not parse is the parser's error.
func ValueReads(match string) ([]string, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	parsed, iss := env.Parse(match)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	root := ast.NavigateAST(parsed.NativeRep())
	reads := map[string]bool{}
	all := func() {
		for _, f := range namedFields {
			reads[f] = true
		}
	}
	for _, c := range ast.MatchDescendants(root, ast.KindMatcher(ast.ComprehensionKind)) {
		cp := c.AsComprehension()
		if cp.IterVar() == requestVar || cp.AccuVar() == requestVar || cp.HasIterVar2() && cp.IterVar2() == requestVar {
			all() // `request` is shadowed somewhere: no telling which reads are the request's
		}
	}
	for _, id := range ast.MatchDescendants(root, identMatcher(requestVar)) {
		sel, ok := id.Parent()
		if !ok || sel.Kind() != ast.SelectKind {
			all() // the whole request, compared or handed on
			continue
		}
		s := sel.AsSelect()
		if s.IsTestOnly() || !slices.Contains(namedFields, s.FieldName()) {
			continue
		}
		if r := valueRead(sel); r != "" {
			reads[r] = true
		}
	}
	out := make([]string, 0, len(reads))
	for r := range reads {
		out = append(out, r)
	}
	slices.Sort(out)
	return out, nil
}

// identMatcher matches the identifiers named name.
func identMatcher(name string) ast.ExprMatcher {
	return func(e ast.NavigableExpr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == name }
}

// valueRead is what sel (request.headers, .query or .attributes) reads,
// judged by its parent: one named value ("headers.x"), none (""), or
// every value (the field's name).
func valueRead(sel ast.NavigableExpr) string {
	field := sel.AsSelect().FieldName()
	named := func(key string) string {
		if field == "headers" {
			key = strings.ToLower(key)
		}
		return field + "." + key
	}
	up, ok := sel.Parent()
	if !ok {
		return field
	}
	switch up.Kind() {
	case ast.SelectKind: // request.attributes.tenant
		if up.AsSelect().IsTestOnly() {
			return ""
		}
		return named(up.AsSelect().FieldName())
	case ast.CallKind:
		c := up.AsCall()
		args := c.Args()
		switch c.FunctionName() {
		case operators.Index, operators.OptIndex:
			if len(args) == 2 && args[0].ID() == sel.ID() && args[1].Kind() == ast.LiteralKind {
				if key, ok := args[1].AsLiteral().Value().(string); ok {
					return named(key)
				}
			}
		case operators.In:
			if len(args) == 2 && args[1].ID() == sel.ID() {
				return "" // a name test
			}
		case overloads.Size:
			return ""
		}
	case ast.ComprehensionKind: // a macro over the map: one variable ranges over its keys
		cp := up.AsComprehension()
		if cp.IterRange().ID() == sel.ID() && !cp.HasIterVar2() {
			return ""
		}
	}
	return field
}
