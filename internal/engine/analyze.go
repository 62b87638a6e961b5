package engine

import (
	"net/netip"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
)

// field is a request field the rule index knows how to look up.
type field int

// The indexed fields. Their order is also the order in which hoisted
// conjuncts are evaluated: the tests whose cost is bounded by their
// literals first, then groups (bounded by the size of the list, which the
// index checks), the IP test last (see hoist).
const (
	fieldMethod field = iota
	fieldHost
	fieldPath
	fieldHeader // one constraint per header name
	fieldGroups
	fieldIP
	numFields
)

// constraint is a conjunct of a rule's match (two, for a guarded header)
// that is a necessary condition on one request field and can only be
// false, never an error, except where strict and guarded say so. The rule
// cannot match a request that fails it.
type constraint struct {
	field field
	ids   []int64 // expression ids of its conjuncts in the checked AST
	// values: method/host: allowed values; path: prefixes; header: allowed
	// values of the header; groups: the groups of which one is required.
	values []string
	ranges []netip.Prefix // IP: ranges, masked
	// strict marks an IP test written with the network extension
	// (cidr(..).containsIP(..)), which errors rather than answering false
	// when source_ip does not parse strictly.
	strict bool
	// header is the header name of a fieldHeader constraint. anyValue: the
	// constraint is only a presence test ('name' in request.headers).
	// guarded: a missing header makes the constraint false; without it, a
	// missing header makes the value test an error (no such key), so the
	// rule stays a candidate.
	header   string
	anyValue bool
	guarded  bool
	// exact says the lookup is not only necessary but sufficient: the
	// conjunct is true exactly when the index finds the rule (for strict
	// tests, when source_ip parses strictly). Path equality is indexed as a
	// prefix test, so it is not exact.
	exact bool
}

// conjuncts flattens the top-level && tree of e, at any nesting, in
// evaluation order.
func conjuncts(e ast.Expr, out []ast.Expr) []ast.Expr {
	if isCall(e, operators.LogicalAnd, 2) {
		args := e.AsCall().Args()
		out = conjuncts(args[0], out)
		return conjuncts(args[1], out)
	}
	return append(out, e)
}

// shape is what the index needs to know about a match.
type shape struct {
	cons []constraint // at most one per field (per header name), in field order
	rest []int64      // ids of the other conjuncts, in written order
	// exactCons: every constraint is exact.
	exactCons bool
}

// exact: the constraints are the whole match, so the index decides it.
func (s shape) exact() bool { return len(s.cons) > 0 && s.exactCons && len(s.rest) == 0 }

// residual: when the index has found all constraints true, the rest of
// the conjuncts alone decide the match.
func (s shape) residual() bool { return len(s.cons) > 0 && s.exactCons && len(s.rest) > 0 }

// order is the hoisted evaluation order: constraints first, then the rest.
func (s shape) order() []int64 {
	var ids []int64
	for _, c := range s.cons {
		ids = append(ids, c.ids...)
	}
	return append(ids, s.rest...)
}

// analyze finds at most one constraint per field among the conjuncts of a
// checked match (per header name: one presence test and one value test,
// which combine). Comprehensions and other calls are never descended into,
// so `request` here is always the request variable, not a shadowing one.
func analyze(e ast.Expr) shape {
	var found [numFields]*constraint
	var headers []*constraint // in order of first appearance
	var sh shape
	for _, c := range conjuncts(e, nil) {
		con, ok := classify(c)
		if ok {
			con.ids = []int64{c.ID()}
			if con.field == fieldHeader {
				ok = addHeader(&headers, con)
			} else if ok = found[con.field] == nil; ok {
				found[con.field] = &con
			}
		}
		if !ok {
			sh.rest = append(sh.rest, c.ID())
		}
	}
	sh.exactCons = true
	for f, c := range found {
		if field(f) == fieldHeader {
			for _, h := range headers {
				sh.cons = append(sh.cons, *h)
				sh.exactCons = sh.exactCons && h.exact
			}
		}
		if c != nil {
			sh.cons = append(sh.cons, *c)
			sh.exactCons = sh.exactCons && c.exact
		}
	}
	return sh
}

// addHeader records a header constraint, combining a presence test with a
// value test of the same header: 'h' in request.headers && request.headers['h']
// == 'v' is false, not an error, when the header is missing. It reports
// false when the header already has a constraint of that kind.
func addHeader(headers *[]*constraint, con constraint) bool {
	for _, h := range *headers {
		if h.header != con.header {
			continue
		}
		if h.anyValue == con.anyValue || h.guarded && !h.anyValue {
			return false // same kind twice, or already combined
		}
		if con.anyValue { // the guard goes first
			h.ids = append(con.ids, h.ids...)
		} else {
			h.ids = append(h.ids, con.ids...)
			h.values = con.values
		}
		h.anyValue, h.guarded = false, true
		h.exact = h.exact && con.exact
		return true
	}
	*headers = append(*headers, &con)
	return true
}

// classify recognises one conjunct; a || of tests of the same field merges
// into one constraint, since it is false exactly when every branch is.
func classify(e ast.Expr) (constraint, bool) {
	if isCall(e, operators.LogicalOr, 2) {
		args := e.AsCall().Args()
		l, ok1 := classify(args[0])
		r, ok2 := classify(args[1])
		if !ok1 || !ok2 || l.field != r.field || l.header != r.header || l.anyValue != r.anyValue {
			return constraint{}, false
		}
		// Header branches are both value tests (an error when the header is
		// missing) or both presence tests (false then), so guarded agrees.
		l.values = append(l.values, r.values...)
		l.ranges = append(l.ranges, r.ranges...)
		l.strict = l.strict || r.strict
		l.exact = l.exact && r.exact
		return l, true
	}
	if c, ok := classifyString(e); ok {
		return c, true
	}
	if c, ok := classifyContainer(e); ok {
		return c, true
	}
	return classifyIP(e)
}

// classifyString recognises `request.F == 'lit'`, `'lit' == request.F`,
// `request.F in ['lit', ...]` for method, host and path, and
// `request.path.startsWith('lit')`. An exact path is indexed as a prefix:
// a path without the prefix certainly differs from it.
func classifyString(e ast.Expr) (constraint, bool) {
	if e.Kind() != ast.CallKind {
		return constraint{}, false
	}
	call := e.AsCall()
	args := call.Args()
	switch {
	case isCall(e, operators.Equals, 2):
		if f, ok := requestField(args[0]); ok {
			return stringConstraint(f, args[1:], f != fieldPath)
		}
		if f, ok := requestField(args[1]); ok {
			return stringConstraint(f, args[:1], f != fieldPath)
		}
	case isCall(e, operators.In, 2) && args[1].Kind() == ast.ListKind:
		list := args[1].AsList()
		if f, ok := requestField(args[0]); ok && len(list.OptionalIndices()) == 0 {
			return stringConstraint(f, list.Elements(), f != fieldPath)
		}
	case call.IsMemberFunction() && call.FunctionName() == overloads.StartsWith && len(args) == 1:
		if f, ok := requestField(call.Target()); ok && f == fieldPath {
			return stringConstraint(f, args, true)
		}
	}
	return constraint{}, false
}

func stringConstraint(f field, lits []ast.Expr, exact bool) (constraint, bool) {
	vals, ok := literalStrings(lits)
	if !ok || f == fieldIP {
		return constraint{}, false
	}
	return constraint{field: f, values: vals, exact: exact}, true
}

// classifyContainer recognises the header and group tests:
//
//	request.headers['h'] == 'lit', 'lit' == request.headers['h'],
//	request.headers['h'] in ['lit', ...]   value tests (also request.headers.h)
//	'h' in request.headers, has(request.headers.h)   presence tests
//	'lit' in request.groups                          group membership
//
// A value test is false when the header has another value and an error
// (no such key) when it is missing; the other forms are never errors.
func classifyContainer(e ast.Expr) (constraint, bool) {
	if e.Kind() == ast.SelectKind && e.AsSelect().IsTestOnly() && isRequestSelect(e.AsSelect().Operand(), "headers") {
		return constraint{field: fieldHeader, header: e.AsSelect().FieldName(), anyValue: true, guarded: true, exact: true}, true
	}
	if e.Kind() != ast.CallKind {
		return constraint{}, false
	}
	args := e.AsCall().Args()
	switch {
	case isCall(e, operators.Equals, 2):
		for _, side := range [2][2]ast.Expr{{args[0], args[1]}, {args[1], args[0]}} {
			if h, ok := headerValue(side[0]); ok {
				if v, ok := literalString(side[1]); ok {
					return constraint{field: fieldHeader, header: h, values: []string{v}, exact: true}, true
				}
			}
		}
	case isCall(e, operators.In, 2):
		if h, ok := headerValue(args[0]); ok && args[1].Kind() == ast.ListKind && len(args[1].AsList().OptionalIndices()) == 0 {
			if vals, ok := literalStrings(args[1].AsList().Elements()); ok {
				return constraint{field: fieldHeader, header: h, values: vals, exact: true}, true
			}
		}
		lit, ok := literalString(args[0])
		switch {
		case ok && isRequestSelect(args[1], "headers"):
			return constraint{field: fieldHeader, header: lit, anyValue: true, guarded: true, exact: true}, true
		case ok && isRequestSelect(args[1], "groups"):
			return constraint{field: fieldGroups, values: []string{lit}, exact: true}, true
		}
	}
	return constraint{}, false
}

// headerValue recognises request.headers['h'] and request.headers.h.
func headerValue(e ast.Expr) (string, bool) {
	switch {
	case isCall(e, operators.Index, 2):
		args := e.AsCall().Args()
		if isRequestSelect(args[0], "headers") {
			return literalString(args[1])
		}
	case e.Kind() == ast.SelectKind && !e.AsSelect().IsTestOnly():
		if isRequestSelect(e.AsSelect().Operand(), "headers") {
			return e.AsSelect().FieldName(), true
		}
	}
	return "", false
}

// classifyIP recognises inIpRange(request.source_ip, 'lit'),
// cidr('lit').containsIP(request.source_ip) and
// cidr('lit').containsIP(ip(request.source_ip)).
func classifyIP(e ast.Expr) (constraint, bool) {
	if e.Kind() != ast.CallKind {
		return constraint{}, false
	}
	call := e.AsCall()
	args := call.Args()
	if !call.IsMemberFunction() && call.FunctionName() == inIPRangeFunc && len(args) == 2 {
		lit, ok := literalString(args[1])
		f, isField := requestField(args[0])
		if !ok || !isField || f != fieldIP {
			return constraint{}, false
		}
		p, err := parseRangeLiteral(lit)
		return constraint{field: fieldIP, ranges: []netip.Prefix{p}, exact: true}, err == nil
	}
	if call.IsMemberFunction() && call.FunctionName() == "containsIP" && len(args) == 1 {
		return classifyContainsIP(call.Target(), args[0])
	}
	return constraint{}, false
}

func classifyContainsIP(target, arg ast.Expr) (constraint, bool) {
	if !isCall(target, "cidr", 1) {
		return constraint{}, false
	}
	lit, ok := literalString(target.AsCall().Args()[0])
	if !ok {
		return constraint{}, false
	}
	if isCall(arg, "ip", 1) {
		arg = arg.AsCall().Args()[0]
	}
	if f, isField := requestField(arg); !isField || f != fieldIP {
		return constraint{}, false
	}
	p, err := netip.ParsePrefix(lit)
	if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
		return constraint{}, false // the network validator already rejected it
	}
	return constraint{field: fieldIP, ranges: []netip.Prefix{p.Masked()}, strict: true, exact: true}, true
}

// requestField recognises request.method, .host, .path and .source_ip.
func requestField(e ast.Expr) (field, bool) {
	if !isRequestSelect(e, "") {
		return 0, false
	}
	switch e.AsSelect().FieldName() {
	case "method":
		return fieldMethod, true
	case "host":
		return fieldHost, true
	case "path":
		return fieldPath, true
	case "source_ip":
		return fieldIP, true
	}
	return 0, false
}

// isRequestSelect recognises request.<name> (any field when name is ""),
// not as a presence test.
func isRequestSelect(e ast.Expr, name string) bool {
	if e.Kind() != ast.SelectKind {
		return false
	}
	sel := e.AsSelect()
	return !sel.IsTestOnly() && sel.Operand().Kind() == ast.IdentKind && sel.Operand().AsIdent() == requestVar &&
		(name == "" || sel.FieldName() == name)
}

func literalStrings(es []ast.Expr) ([]string, bool) {
	out := make([]string, 0, len(es))
	for _, e := range es {
		s, ok := literalString(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, len(out) > 0
}

func literalString(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

// isCall reports whether e is a global call of fn with n arguments.
func isCall(e ast.Expr, fn string, n int) bool {
	if e.Kind() != ast.CallKind {
		return false
	}
	c := e.AsCall()
	return !c.IsMemberFunction() && c.FunctionName() == fn && len(c.Args()) == n
}
