package engine

// Delta evaluates a policy that differs from a base policy in a few rules
// (an experiment beside its live policy) from the base's decision of the
// same request, instead of from scratch. Shadow evaluation runs every
// ACTIVE experiment on every live request; most experiments change one or
// two rules of a large policy, so nearly all of that work would repeat
// what the live decision already established.
//
// What the base decision proves: when it carries no error, every base rule
// before the deciding one evaluated to false without error (an error would
// have decided, or with on_error = skip been carried in Decision.Error),
// and the deciding rule evaluated to true; with the default action, every
// base rule was false. A rule of the experiment that is the same as a base
// rule (name, priority, action and match text: the same program under the
// same options) evaluates the same on the same request. The rules are in
// (priority, name) order in both policies, so the same rules keep their
// relative order, and the experiment's rules before the twin of the
// deciding base rule that are the same as a base rule are exactly twins of
// base rules before it: all false. Only the experiment's changed rules
// before that point need evaluating; if none matches, the twin decides
// (or, for the default, the experiment's default action).
//
// Everything else (a base decision with an error, a deciding rule the
// experiment changed or removed, a decision from another version of the
// base) falls back to Evaluate. TestDeltaEquivalence checks the result is
// always identical to Evaluate.
type Delta struct {
	exp      *CompiledPolicy
	baseEtag string
	// twin maps a base rule's name to the position of its twin in the
	// experiment; rules the experiment changed or removed are absent.
	twin map[string]int
	// changed are the positions of the experiment's rules that have no
	// twin in the base, ascending.
	changed []int
	// sub indexes the changed rules alone (sub position k is experiment
	// position changed[k]): looking them up costs what a policy of a few
	// rules costs, not what the whole experiment's index does. nil when
	// the experiment has no index.
	sub *ruleIndex
}

// NewDelta prepares exp's evaluation from base's decisions. A nil base,
// or one compiled with another run-time cost limit (under which the same
// match may fail where the other passes), gives a Delta that always
// evaluates exp in full.
func NewDelta(exp, base *CompiledPolicy) *Delta {
	d := &Delta{exp: exp}
	if base == nil || base.costLimit != exp.costLimit {
		return d
	}
	d.baseEtag = base.etag
	byName := make(map[string]int, len(exp.rules))
	for i := range exp.rules {
		byName[exp.rules[i].name] = i
	}
	d.twin = make(map[string]int, len(base.rules))
	hasTwin := make([]bool, len(exp.rules))
	for i := range base.rules {
		b := &base.rules[i]
		j, ok := byName[b.name]
		if ok && exp.rules[j].sameAs(b) {
			d.twin[b.name] = j
			hasTwin[j] = true
		}
	}
	var cons [][]constraint
	var rules []compiledRule
	for j, ok := range hasTwin {
		if !ok {
			d.changed = append(d.changed, j)
			cons, rules = append(cons, exp.cons[j]), append(rules, exp.rules[j])
		}
	}
	if exp.index != nil && len(rules) > 0 {
		d.sub = buildIndex(cons, rules)
	}
	return d
}

// sameAs reports whether r and o evaluate alike on every request: the
// same match compiled under the same options (the rules of a node's live
// policy and experiments are), with the same action, at the same place in
// the (priority, name) order.
func (r *compiledRule) sameAs(o *compiledRule) bool {
	return r.name == o.name && r.priority == o.priority && r.verdict == o.verdict && r.match == o.match
}

// Policy is the experiment's program.
func (d *Delta) Policy() *CompiledPolicy { return d.exp }

// Evaluate decides req with the experiment, given base's decision of the
// same request. The result is identical to d.Policy().Evaluate(req).
func (d *Delta) Evaluate(req *Request, base Decision) Decision {
	if d.baseEtag == "" || base.Etag != d.baseEtag || base.Error != "" {
		return d.exp.Evaluate(req)
	}
	stop := len(d.exp.rules)
	if base.Rule != "" {
		j, ok := d.twin[base.Rule]
		if !ok {
			return d.exp.Evaluate(req)
		}
		stop = j
	}
	cp := d.exp
	if len(d.changed) > 0 && d.changed[0] < stop {
		ev := evaluation{cp: cp, req: req}
		defer ev.release()
		if dec, done := d.changedBefore(&ev, stop); done {
			return dec
		}
		return d.decideAt(stop, ev.skipped)
	}
	return d.decideAt(stop, "")
}

// changedBefore evaluates the changed rules before position stop, in
// order, until one decides. The index of the changed rules (when the
// experiment has an index) is walked as Evaluate walks the whole one, so
// that changed rules it rules out are not evaluated and those it decides
// need no CEL.
func (d *Delta) changedBefore(ev *evaluation, stop int) (Decision, bool) {
	cp := d.exp
	if d.sub == nil {
		for _, j := range d.changed {
			if j >= stop {
				break
			}
			if dec, done := ev.try(j, false); done {
				return dec, true
			}
		}
		return Decision{}, false
	}
	var c cursor
	d.sub.candidates(&c, ev.req)
	for k := c.next(ev); k >= 0; k = c.next(ev) {
		j := d.changed[k]
		if j >= stop {
			break
		}
		if c.decided(k) {
			r := &cp.rules[j]
			return cp.decision(r.verdict, r.name, ev.skipped), true
		}
		if dec, done := ev.try(j, c.known(k)); done {
			return dec, true
		}
	}
	return Decision{}, false
}

// decideAt is the experiment's decision when nothing before position
// stop matched: the rule at stop, which matches, or the default action.
func (d *Delta) decideAt(stop int, skipped string) Decision {
	cp := d.exp
	if stop < len(cp.rules) {
		r := &cp.rules[stop]
		return cp.decision(r.verdict, r.name, skipped)
	}
	return cp.decision(cp.deflt, "", skipped)
}
