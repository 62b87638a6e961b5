package engine

import (
	"slices"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Native plans.
//
// Most matches real policies write are a few string tests on the
// request's fields: a method in a list, a path prefix, a header matched
// against a list of words, a host in a named list. cel-go evaluates each
// through an execution frame, its dispatch and boxed values, about 0.4 µs
// a rule; a decision of the example edge firewall ran 4.7 of them, a third
// of an :evaluate's own CPU (issue 26). nativePlan compiles such a match
// into Go closures over the request instead. It covers only operations
// whose CEL result it can reproduce exactly, and gives up (ok false)
// wherever CEL would produce an error, a missing header or a non-ASCII
// lowerAscii() for instance: the rule is then evaluated by CEL as before,
// so on_error and its message are CEL's. Evaluate uses a native plan only
// where it would use the untracked fast program (the request within the
// sizes the cost estimate assumed), so that the run-time cost limit fires
// exactly as without it. TestNativePlansAgreeWithCEL compares the two.
// A plan holds closures and, for a list of literals, one slice of the
// list's strings (which share the AST's bytes): little beside the programs
// the budgets count (TestSizeBytesCalibration holds with them).

// natBool is a boolean part of a match; ok false means CEL must decide.
type natBool func(req *Request) (v, ok bool)

// natStr is a string part of a match.
type natStr func(req *Request) (s string, ok bool)

// natInt is an integer part of a match (a literal, or the size of a map
// or list field).
type natInt func(req *Request) (n int64, ok bool)

// nativePlan returns the native plan of a checked match, or nil when some
// part of it is not covered.
func nativePlan(e ast.Expr, pl *policyLists) natBool {
	return natBoolOf(e, pl)
}

func natBoolOf(e ast.Expr, pl *policyLists) natBool {
	switch e.Kind() {
	case ast.LiteralKind:
		if b, ok := e.AsLiteral().(types.Bool); ok {
			v := bool(b)
			return func(*Request) (bool, bool) { return v, true }
		}
		return nil
	case ast.CallKind:
	default:
		return nil
	}
	c := e.AsCall()
	args := c.Args()
	if c.IsMemberFunction() {
		return natMember(c.FunctionName(), c.Target(), args, pl)
	}
	switch fn := c.FunctionName(); {
	case fn == operators.LogicalAnd && len(args) == 2:
		return natAnd(natBoolOf(args[0], pl), natBoolOf(args[1], pl))
	case fn == operators.LogicalOr && len(args) == 2:
		return natOr(natBoolOf(args[0], pl), natBoolOf(args[1], pl))
	case fn == operators.LogicalNot && len(args) == 1:
		if a := natBoolOf(args[0], pl); a != nil {
			return func(req *Request) (bool, bool) { v, ok := a(req); return !v, ok }
		}
		return nil
	case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
		if p := natStrCompare(fn, args[0], args[1], pl); p != nil {
			return p
		}
		if p := natIntCompare(fn, args[0], args[1]); p != nil {
			return p
		}
		return natDoubleCompare(fn, args[0], args[1])
	case (fn == operators.Less || fn == operators.LessEquals || fn == operators.Greater || fn == operators.GreaterEquals) && len(args) == 2:
		if p := natIntCompare(fn, args[0], args[1]); p != nil {
			return p
		}
		return natDoubleCompare(fn, args[0], args[1])
	case fn == operators.In && len(args) == 2:
		return natIn(args[0], args[1], pl)
	case fn == overloads.Matches && len(args) == 2:
		return natMatches(args[0], args[1], pl)
	case fn == inIPRangeFunc && len(args) == 2:
		return natInIPRange(args[0], args[1], pl)
	case (fn == inIPListFunc || fn == inListFunc) && len(args) == 2:
		return natInNamedList(fn, args[0], args[1], pl)
	}
	return nil
}

// natAnd is CEL's &&: false wins over an error on either side.
func natAnd(a, b natBool) natBool {
	if a == nil || b == nil {
		return nil
	}
	return func(req *Request) (bool, bool) {
		va, oka := a(req)
		if oka && !va {
			return false, true
		}
		vb, okb := b(req)
		if okb && !vb {
			return false, true
		}
		return true, oka && okb
	}
}

// natOr is CEL's ||: true wins over an error on either side.
func natOr(a, b natBool) natBool {
	if a == nil || b == nil {
		return nil
	}
	return func(req *Request) (bool, bool) {
		va, oka := a(req)
		if oka && va {
			return true, true
		}
		vb, okb := b(req)
		if okb && vb {
			return true, true
		}
		return false, oka && okb
	}
}

// natMember covers s.startsWith(x), s.endsWith(x), s.contains(x) and
// s.matches('literal') on strings.
func natMember(fn string, target ast.Expr, args []ast.Expr, pl *policyLists) natBool {
	if len(args) != 1 {
		return nil
	}
	if fn == overloads.Matches {
		return natMatches(target, args[0], pl)
	}
	var test func(s, x string) bool
	switch fn {
	case overloads.StartsWith:
		test = strings.HasPrefix
	case overloads.EndsWith:
		test = strings.HasSuffix
	case overloads.Contains:
		test = strings.Contains
	default:
		return nil
	}
	s, x := natStrOf(target, pl), natStrOf(args[0], pl)
	if s == nil || x == nil {
		return nil
	}
	return func(req *Request) (bool, bool) {
		sv, ok1 := s(req)
		xv, ok2 := x(req)
		return ok1 && ok2 && test(sv, xv), ok1 && ok2
	}
}

// natMatches is matches() with a literal pattern that is a list of words:
// the word search of literalregex.go, RE2's unanchored match as cel-go's.
func natMatches(target, pattern ast.Expr, pl *policyLists) natBool {
	p, ok := literalString(pattern)
	s := natStrOf(target, pl)
	if !ok || s == nil {
		return nil
	}
	// Only a pattern that is a list of words: any other regex would be
	// compiled a second time beside CEL's, outside the program budgets.
	m, ok := newWordMatcher(p)
	if !ok {
		return nil
	}
	return func(req *Request) (bool, bool) {
		v, ok := s(req)
		return ok && m.match(v), ok
	}
}

// natStrCompare is == or != between strings.
func natStrCompare(fn string, l, r ast.Expr, pl *policyLists) natBool {
	a, b := natStrOf(l, pl), natStrOf(r, pl)
	if a == nil || b == nil {
		return nil
	}
	ne := fn == operators.NotEquals
	return func(req *Request) (bool, bool) {
		av, ok1 := a(req)
		bv, ok2 := b(req)
		return (av == bv) != ne, ok1 && ok2
	}
}

// natIntCompare compares integers: literals and sizes of map and list
// fields.
func natIntCompare(fn string, l, r ast.Expr) natBool {
	return natCompare[int64](fn, natIntOf(l), natIntOf(r))
}

// natDoubleCompare compares doubles: double literals and double() of an
// attribute.
func natDoubleCompare(fn string, l, r ast.Expr) natBool {
	return natCompare[float64](fn, natDoubleOf(l), natDoubleOf(r))
}

// natCompare is the comparison fn of two numbers of one type.
func natCompare[T int64 | float64](fn string, a, b func(*Request) (T, bool)) natBool {
	cmp := comparison[T](fn)
	if a == nil || b == nil || cmp == nil {
		return nil
	}
	return func(req *Request) (bool, bool) {
		x, ok1 := a(req)
		y, ok2 := b(req)
		return ok1 && ok2 && cmp(x, y), ok1 && ok2
	}
}

// comparison is the Go comparison of a CEL comparison operator.
func comparison[T int64 | float64](fn string) func(x, y T) bool {
	switch fn {
	case operators.Equals:
		return func(x, y T) bool { return x == y }
	case operators.NotEquals:
		return func(x, y T) bool { return x != y }
	case operators.Less:
		return func(x, y T) bool { return x < y }
	case operators.LessEquals:
		return func(x, y T) bool { return x <= y }
	case operators.Greater:
		return func(x, y T) bool { return x > y }
	case operators.GreaterEquals:
		return func(x, y T) bool { return x >= y }
	}
	return nil
}

// natDouble is a double part of a match.
type natDouble func(req *Request) (f float64, ok bool)

// natDoubleOf covers double literals and double() of an attribute read by
// a literal name, when the attribute is a number: a missing attribute is
// CEL's error, and double() of a string parses it, which is left to CEL.
func natDoubleOf(e ast.Expr) natDouble {
	switch e.Kind() {
	case ast.LiteralKind:
		if f, ok := e.AsLiteral().(types.Double); ok {
			v := float64(f)
			return func(*Request) (float64, bool) { return v, true }
		}
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() || c.FunctionName() != overloads.TypeConvertDouble || len(c.Args()) != 1 {
			return nil
		}
		key, ok := attributeKey(c.Args()[0])
		if !ok {
			return nil
		}
		return func(req *Request) (float64, bool) {
			switch v := req.Attributes[key].(type) {
			case float64:
				return v, true
			case int64:
				return float64(v), true
			case int:
				return float64(v), true
			}
			return 0, false
		}
	}
	return nil
}

// attributeKey recognises request.attributes['name'] and
// request.attributes.name.
func attributeKey(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.SelectKind:
		sel := e.AsSelect()
		if !sel.IsTestOnly() && isRequestSelect(sel.Operand(), "attributes") {
			return sel.FieldName(), true
		}
	case ast.CallKind:
		c := e.AsCall()
		if args := c.Args(); !c.IsMemberFunction() && c.FunctionName() == operators.Index && len(args) == 2 &&
			isRequestSelect(args[0], "attributes") {
			return literalString(args[1])
		}
	}
	return "", false
}

// natIn covers x in ['literal', ...], k in request.headers (or query) and
// g in request.groups.
func natIn(elem, coll ast.Expr, pl *policyLists) natBool {
	x := natStrOf(elem, pl)
	if x == nil {
		return nil
	}
	switch {
	case coll.Kind() == ast.ListKind:
		l := coll.AsList()
		if len(l.OptionalIndices()) != 0 {
			return nil
		}
		set, ok := literalStrings(l.Elements())
		if !ok {
			return nil
		}
		if len(set) <= 8 {
			return func(req *Request) (bool, bool) {
				v, ok := x(req)
				return ok && slices.Contains(set, v), ok
			}
		}
		// A long list is searched, not scanned: CEL's optimizer makes a
		// set of it, and a policy may list a thousand paths.
		slices.Sort(set)
		return func(req *Request) (bool, bool) {
			v, ok := x(req)
			_, in := slices.BinarySearch(set, v)
			return ok && in, ok
		}
	case isRequestSelect(coll, "headers"), isRequestSelect(coll, "query"):
		field := mapField(coll.AsSelect().FieldName())
		return func(req *Request) (bool, bool) {
			v, ok := x(req)
			_, in := field(req).Get(v)
			return ok && in, ok
		}
	case isRequestSelect(coll, "attributes"):
		return func(req *Request) (bool, bool) {
			v, ok := x(req)
			_, in := req.Attributes[v]
			return ok && in, ok
		}
	case isRequestSelect(coll, "groups"):
		return func(req *Request) (bool, bool) {
			v, ok := x(req)
			return ok && slices.Contains(req.Groups, v), ok
		}
	}
	return nil
}

// natInIPRange is inIpRange(ip, 'literal range') (inIPRangeBinding).
func natInIPRange(ip, cidr ast.Expr, pl *policyLists) natBool {
	lit, ok := literalString(cidr)
	s := natStrOf(ip, pl)
	if !ok || s == nil {
		return nil
	}
	prefix, err := parseRangeLiteral(lit)
	if err != nil {
		return nil
	}
	return func(req *Request) (bool, bool) {
		v, ok := s(req)
		if !ok {
			return false, false
		}
		addr, parsed := parseLenientIP(v)
		return parsed && prefix.Contains(addr), true
	}
}

// natInNamedList is inIpList(ip, 'name') or inList(value, 'name') on a
// list of the policy (policyLists.inIPList and inList).
func natInNamedList(fn string, value, name ast.Expr, pl *policyLists) natBool {
	n, ok := literalString(name)
	s := natStrOf(value, pl)
	if !ok || s == nil || pl == nil {
		return nil
	}
	l := pl.byName[n]
	switch {
	case l == nil:
		return nil
	case fn == inIPListFunc && l.kind == policy.ListIP:
		return func(req *Request) (bool, bool) {
			v, ok := s(req)
			return ok && l.containsIP(v), ok
		}
	case fn == inListFunc && l.kind == policy.ListString:
		return func(req *Request) (bool, bool) {
			v, ok := s(req)
			return ok && l.hasString(v), ok
		}
	}
	return nil
}

// natStrOf covers string literals, the string fields of request, a
// header or query value by a literal name, and lowerAscii() of those.
func natStrOf(e ast.Expr, pl *policyLists) natStr {
	switch e.Kind() {
	case ast.LiteralKind:
		if s, ok := literalString(e); ok {
			return func(*Request) (string, bool) { return s, true }
		}
	case ast.SelectKind:
		if isRequestSelect(e, "") {
			if f := stringField(e.AsSelect().FieldName()); f != nil {
				return func(req *Request) (string, bool) { return f(req), true }
			}
		}
	case ast.CallKind:
		c := e.AsCall()
		args := c.Args()
		switch {
		case !c.IsMemberFunction() && c.FunctionName() == operators.Index && len(args) == 2 &&
			(isRequestSelect(args[0], "headers") || isRequestSelect(args[0], "query")):
			key, ok := literalString(args[1])
			if !ok {
				return nil
			}
			field := mapField(args[0].AsSelect().FieldName())
			return func(req *Request) (string, bool) {
				v, ok := field(req).Get(key) // a missing key is CEL's error
				return v, ok
			}
		case c.IsMemberFunction() && c.FunctionName() == "lowerAscii" && len(args) == 0:
			if s := natStrOf(c.Target(), pl); s != nil {
				return func(req *Request) (string, bool) {
					v, ok := s(req)
					if !ok {
						return "", false
					}
					return lowerASCII(v)
				}
			}
		}
	}
	return nil
}

// lowerASCII is the strings extension's lowerAscii() for ASCII input; it
// gives up on other input, which cel-go reads as runes (replacing invalid
// UTF-8). It allocates only when there is something to lower.
func lowerASCII(s string) (string, bool) {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return "", false
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	if !upper {
		return s, true
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b), true
}

// natIntOf covers int literals and size() of request.headers, query and
// groups (the number of entries; not of strings, which CEL counts in code
// points).
func natIntOf(e ast.Expr) natInt {
	switch e.Kind() {
	case ast.LiteralKind:
		if n, ok := e.AsLiteral().(types.Int); ok {
			v := int64(n)
			return func(*Request) (int64, bool) { return v, true }
		}
	case ast.CallKind:
		c := e.AsCall()
		var arg ast.Expr
		switch {
		case c.FunctionName() != overloads.Size:
			return nil
		case c.IsMemberFunction() && len(c.Args()) == 0:
			arg = c.Target()
		case !c.IsMemberFunction() && len(c.Args()) == 1:
			arg = c.Args()[0]
		default:
			return nil
		}
		switch {
		case isRequestSelect(arg, "headers"), isRequestSelect(arg, "query"):
			field := mapField(arg.AsSelect().FieldName())
			return func(req *Request) (int64, bool) { return int64(field(req).Len()), true }
		case isRequestSelect(arg, "groups"):
			return func(req *Request) (int64, bool) { return int64(len(req.Groups)), true }
		}
	}
	return nil
}

// stringField is the getter of a string field of request by its CEL name.
func stringField(name string) func(*Request) string {
	switch name {
	case "method":
		return func(r *Request) string { return r.Method }
	case "path":
		return func(r *Request) string { return r.Path }
	case "raw_path":
		return func(r *Request) string { return r.RawPath }
	case "host":
		return func(r *Request) string { return r.Host }
	case "scheme":
		return func(r *Request) string { return r.Scheme }
	case "source_ip":
		return func(r *Request) string { return r.SourceIP }
	case "principal":
		return func(r *Request) string { return r.Principal }
	}
	return nil
}

// mapField is the getter of headers or query.
func mapField(name string) func(*Request) *Pairs {
	if name == "headers" {
		return func(r *Request) *Pairs { return &r.Headers }
	}
	return func(r *Request) *Pairs { return &r.Query }
}
