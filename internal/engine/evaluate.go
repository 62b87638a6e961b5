package engine

import (
	"strconv"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Evaluate decides req: the rules in (priority, name) order, the first
// whose match is true deciding with its action, and the default action
// (Rule "") when none matches.
//
// A match that fails at run time (a missing map key, a bad address given
// to ip(), the run-time cost limit) applies the policy's on_error: "deny"
// or "allow" decide with that rule and Decision.Error set; "skip" treats
// the rule as not matching, and the first such error is carried in
// Decision.Error of whatever decision follows, so that a broken rule stays
// visible even when a later rule or the default decides.
//
// req is only read. It is not validated: a source_ip that is not an
// address simply fails the IP tests (see docs/policy-language.md).
func (cp *CompiledPolicy) Evaluate(req *Request) Decision {
	return cp.evaluate(evaluation{cp: cp, req: req})
}

// EvaluateDecoded is Evaluate for a request decoded from a JSON body of
// body bytes (DecodeRequestWithin): no string of a body that short can
// outgrow the cost estimate's, so the check that the request fits the
// estimate counts entries without measuring every header.
func (cp *CompiledPolicy) EvaluateDecoded(req *Request, body int) Decision {
	return cp.evaluate(evaluation{cp: cp, req: req, body: body})
}

func (cp *CompiledPolicy) evaluate(ev evaluation) Decision {
	req := ev.req
	defer ev.release()
	if cp.index == nil {
		for i := range cp.rules {
			if d, done := ev.try(i, false); done {
				return d
			}
		}
		return cp.decision(cp.deflt, "", ev.skipped)
	}
	var c cursor
	cp.index.candidates(&c, req, &ev)
	for i := c.next(&ev); i >= 0; i = c.next(&ev) {
		if c.decided(i) {
			r := &cp.rules[i]
			return cp.decision(r.verdict, r.name, ev.skipped)
		}
		if d, done := ev.try(i, c.known(i)); done {
			return d
		}
	}
	return cp.decision(cp.deflt, "", ev.skipped)
}

// evaluation is the state of one Evaluate call.
type evaluation struct {
	cp      *CompiledPolicy
	req     *Request
	st      *evalState // from the pool once CEL or the index needs it
	fits    int8       // 0 unknown, 1 within the estimate's sizes, -1 not
	body    int        // the bytes of the JSON req was decoded from; 0 unknown
	skipped string     // the first error of a rule skipped by on_error = skip
}

// state binds the request for CEL: the first rule evaluated takes a state
// from the pool, and every later rule shares its memoised field values.
func (ev *evaluation) state() *evalState {
	if ev.st == nil {
		ev.st = newEvalState(ev.req)
	}
	return ev.st
}

// scratch lends the index n zeroed words until release.
func (ev *evaluation) scratch(n int) bitset { return ev.state().scratch(n) }

// release returns the state to its pool; nothing of it may be used after.
func (ev *evaluation) release() {
	if ev.st != nil {
		ev.st.release()
		ev.st = nil
	}
}

// try evaluates rule i; done reports whether it decided. known says the
// index has found all the rule's constraints true.
func (ev *evaluation) try(i int, known bool) (Decision, bool) {
	cp := ev.cp
	r := &cp.rules[i]
	for _, g := range r.guards {
		if !g.admits(ev.req) {
			return Decision{}, false
		}
	}
	// The native plan stands in for the fast program only, where the cost
	// limit cannot fire; where it cannot decide, CEL does.
	if r.native != nil && r.fast != nil && ev.fitsEstimate() {
		if v, ok := r.native(ev.req); ok {
			if v {
				return cp.decision(r.verdict, r.name, ev.skipped), true
			}
			return Decision{}, false
		}
	}
	out, _, err := ev.program(r, known).Eval(ev.state())
	if err == nil {
		if out == types.True {
			return cp.decision(r.verdict, r.name, ev.skipped), true
		}
		return Decision{}, false
	}
	msg := "rule " + strconv.Quote(r.name) + ": " + err.Error()
	switch cp.onError {
	case policy.OnErrorAllow:
		return cp.decision(Allow, r.name, msg), true
	case policy.OnErrorSkip:
		if ev.skipped == "" {
			ev.skipped = msg
		}
		return Decision{}, false
	default:
		return cp.decision(Deny, r.name, msg), true
	}
}

// program picks the untracked plans only when they cannot make a
// difference: the request is no bigger than the cost estimate assumed, so
// the rule's cost is at most its estimate, which Compile checked against
// the run-time limit. The residual plan skips conjuncts the index has
// already found true; true && x is x, errors included.
func (ev *evaluation) program(r *compiledRule, known bool) cel.Program {
	if r.fast == nil || !ev.fitsEstimate() {
		return r.tracked
	}
	if known && r.residual != nil {
		return r.residual
	}
	return r.fast
}

// fitsEstimate caches fitsEstimate for the request: it is needed only once
// a rule has to be evaluated, and then at most once.
func (ev *evaluation) fitsEstimate() bool {
	if ev.fits == 0 {
		ev.fits = -1
		if fitsEstimateDecoded(ev.req, ev.body) {
			ev.fits = 1
		}
	}
	return ev.fits > 0
}

func (cp *CompiledPolicy) decision(v Verdict, rule, errMsg string) Decision {
	return Decision{Verdict: v, Rule: rule, Policy: cp.resource, Etag: cp.etag, Error: errMsg}
}
