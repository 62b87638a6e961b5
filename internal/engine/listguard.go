package engine

import (
	"cel.dev/cel-go/common/ast"

	"github.com/policyrollout/reconciler/internal/policy"
)

// listGuard is a top-level conjunct of a match that tests a request field
// against a named list: inIpList(request.source_ip, 'x') or
// inList(request.host, 'x') (method, path, principal too). A request whose
// field is not in the list cannot match the rule (false && anything is
// false in CEL, errors included), so the rule is not evaluated for it: a
// list rule is a candidate only for the requests it can match, at the cost
// of one lookup, whatever the size of the list. It complements the rule
// index, whose structures grow with the number of ranges and so would not
// hold a million entries.
type listGuard struct {
	list  *compiledList
	field string // the request field: source_ip, host, method, path, principal
}

// admits reports whether req can pass the guard.
func (g listGuard) admits(req *Request) bool {
	switch g.field {
	case "source_ip":
		return g.list.containsIP(req.SourceIP)
	case "host":
		return g.list.hasString(req.Host)
	case "method":
		return g.list.hasString(req.Method)
	case "path":
		return g.list.hasString(req.Path)
	case "principal":
		return g.list.hasString(req.Principal)
	}
	return true
}

func (l *compiledList) hasString(s string) bool {
	_, ok := l.strs[s]
	return ok
}

// listGuards finds the guards among the top-level conjuncts of a checked
// match whose list calls checkListCalls accepted.
func listGuards(e ast.Expr, pl *policyLists) []listGuard {
	var out []listGuard
	for _, c := range conjuncts(e, nil) {
		if g, ok := guardOf(c, pl); ok {
			out = append(out, g)
		}
	}
	return out
}

func guardOf(e ast.Expr, pl *policyLists) (listGuard, bool) {
	var want policy.ListKind
	switch {
	case isCall(e, inIPListFunc, 2):
		want = policy.ListIP
	case isCall(e, inListFunc, 2):
		want = policy.ListString
	default:
		return listGuard{}, false
	}
	args := e.AsCall().Args()
	name, ok := literalString(args[listArgumentIndex])
	l := pl.byName[name]
	if !ok || l == nil || l.kind != want || !isRequestSelect(args[0], "") {
		return listGuard{}, false
	}
	field := args[0].AsSelect().FieldName()
	switch {
	case want == policy.ListIP && field == "source_ip",
		want == policy.ListString && (field == "host" || field == "method" || field == "path" || field == "principal"):
		return listGuard{list: l, field: field}, true
	}
	return listGuard{}, false
}
