package engine

import "github.com/policyrollout/reconciler/internal/policy"

// shared is the rules of a base policy by match text, whose programs a
// policy compiled beside it reuses (CompileBeside). The zero value shares
// nothing.
type shared struct {
	base    *CompiledPolicy
	byMatch map[string]int // match text -> position in base.rules
}

// sharedPrograms returns base's rules by match when base was compiled
// under opts's budgets: the run-time cost limit is in the tracked program,
// and the compile-time budget decides whether a match compiles at all.
func sharedPrograms(base *CompiledPolicy, opts Options, lists policy.Lists) shared {
	// Programs are bound to their policy's lists: shared only when the
	// lists are the same content.
	if base == nil || base.costLimit != opts.RuntimeCostLimit || base.maxRuleCost != opts.MaxRuleCost ||
		!sameLists(base.src.Lists, lists) {
		return shared{}
	}
	s := shared{base: base, byMatch: make(map[string]int, len(base.rules))}
	for i := range base.rules {
		if _, dup := s.byMatch[base.rules[i].match]; !dup {
			s.byMatch[base.rules[i].match] = i
		}
	}
	return s
}

// lookup returns a copy of the base rule whose match is match, with its
// constraints; the caller gives it its own name, verdict and priority.
// Programs and constraints are immutable, so sharing them is safe.
func (s shared) lookup(match string) (compiledRule, []constraint, bool) {
	i, ok := s.byMatch[match]
	if !ok {
		return compiledRule{}, nil, false
	}
	return s.base.rules[i], s.base.cons[i], true
}

// sameLists reports whether two policies use the same list contents, so
// that programs bound to one's lists are right for the other's.
func sameLists(a, b policy.Lists) bool {
	if len(a) != len(b) {
		return false
	}
	for name, l := range a {
		if o, ok := b[name]; !ok || o.Hash != l.Hash || o.Kind != l.Kind {
			return false
		}
	}
	return true
}
