package engine

import "strings"

// DeltaSet evaluates policies that differ from a base policy in a few rules
// (the ACTIVE experiments beside their live policy) from the base's
// decision of the same request, instead of from scratch. Shadow evaluation
// runs every ACTIVE experiment on every live request; most experiments
// change one or two rules of a large policy, so nearly all of that work
// would repeat what the live decision already established.
//
// What the base decision proves: when it carries no error, every base rule
// before the deciding one evaluated to false without error (an error would
// have decided, or with on_error = skip been carried in Decision.Error),
// and the deciding rule evaluated to true; with the default action, every
// base rule was false. A rule of an experiment that is the same as a base
// rule (name, priority, action and match text: the same program under the
// same options) evaluates the same on the same request. The rules are in
// (priority, name) order in both policies, so the same rules keep their
// relative order, and the experiment's rules before the twin of the
// deciding base rule that are the same as a base rule are exactly twins of
// base rules before it: all false. Only the experiment's changed rules
// before that point need evaluating; if none matches, the twin decides
// (or, for the default, the experiment's default action).
//
// The changed rules of all the experiments are indexed together, so one
// index walk per request serves every experiment: the lookups cost what a
// policy of that many rules costs, once, rather than once per experiment.
//
// Everything else (a base decision with an error, a deciding rule an
// experiment changed or removed, a decision from another version of the
// base, an experiment compiled under another run-time cost limit) falls
// back to Evaluate. TestDeltaEquivalence and TestDeltaSetEquivalence check
// the result is always identical to Evaluate.
type DeltaSet struct {
	baseEtag string
	nBase    int // rules of the base
	// basePos maps a base rule's name to its position; nil when no
	// experiment can use the base's decisions.
	basePos map[string]int32
	exps    []deltaExp
	// stops[p*len(exps)+i] is where experiment i stops when base rule p
	// decided (p = nBase: the base's default action): row p holds every
	// experiment's, so that one request reads one row.
	stops []stop
	// union lists the changed rules of every experiment that uses the
	// base, by experiment and, within one, in ascending position: walking
	// it (or its index) in order meets each experiment's changed rules in
	// that experiment's evaluation order.
	union []member
	// ix indexes the union (position k is union[k]); nil when the
	// experiments have no index.
	ix *ruleIndex
}

// deltaExp is one experiment of a DeltaSet, with what its decisions
// carry, so that deciding from the stop table reads nothing of cp.
type deltaExp struct {
	cp             *CompiledPolicy
	resource, etag string
	// first is the position of cp's first changed rule (len(cp.rules)
	// when there is none): a request decided before it needs no walk.
	first int32
}

// stop is an experiment's decision when none of its changed rules before
// pos matches: the twin of the base's deciding rule (or the default, at
// len(cp.rules)) decides with its name and verdict. pos -1: the
// experiment changed or removed that rule, or cannot use the base's
// decisions at all; it is evaluated in full.
type stop struct {
	pos     int32
	rule    string
	verdict Verdict
}

// member is a changed rule: experiment exp's rule at position pos.
type member struct{ exp, pos int32 }

// NewDeltaSet prepares the evaluation of exps from base's decisions. A nil
// base, or an experiment compiled with another run-time cost limit (under
// which the same match may fail where the other passes), gives an
// experiment that is always evaluated in full.
func NewDeltaSet(base *CompiledPolicy, exps []*CompiledPolicy) *DeltaSet {
	s := &DeltaSet{exps: make([]deltaExp, len(exps))}
	for i, exp := range exps {
		s.exps[i] = deltaExp{cp: exp, resource: exp.resource, etag: exp.etag, first: int32(len(exp.rules))}
	}
	if base == nil {
		return s
	}
	s.baseEtag, s.nBase = base.etag, len(base.rules)
	s.basePos = make(map[string]int32, len(base.rules))
	for i := range base.rules {
		s.basePos[base.rules[i].name] = int32(i)
	}
	n := len(exps)
	s.stops = make([]stop, (s.nBase+1)*n)
	var cons [][]constraint
	var rules []compiledRule
	indexed := true
	for i, exp := range exps {
		for p := range s.nBase + 1 {
			s.stops[p*n+i].pos = -1
		}
		if base.costLimit != exp.costLimit {
			continue
		}
		hasTwin := make([]bool, len(exp.rules))
		for p, j := range twins(exp, base) {
			st := &s.stops[p*n+i]
			switch {
			case j < 0:
			case int(j) < len(exp.rules):
				hasTwin[j] = true
				r := &exp.rules[j]
				*st = stop{pos: j, rule: r.name, verdict: r.verdict}
			default:
				*st = stop{pos: j, verdict: exp.deflt}
			}
		}
		e := &s.exps[i]
		for j, ok := range hasTwin {
			if ok {
				continue
			}
			e.first = min(e.first, int32(j))
			s.union = append(s.union, member{int32(i), int32(j)})
			cons, rules = append(cons, exp.cons[j]), append(rules, exp.rules[j])
			indexed = indexed && exp.index != nil
		}
	}
	if indexed && len(s.union) > 0 {
		s.ix = buildIndex(cons, rules)
	}
	return s
}

// twins returns, for each base rule, the position of its twin in exp
// (-1: none), and len(exp.rules) for the base's default.
func twins(exp, base *CompiledPolicy) []int32 {
	byName := make(map[string]int32, len(exp.rules))
	for i := range exp.rules {
		byName[exp.rules[i].name] = int32(i)
	}
	changed := changedLists(exp, base)
	stopAt := make([]int32, len(base.rules)+1)
	for i := range base.rules {
		b := &base.rules[i]
		stopAt[i] = -1
		if j, ok := byName[b.name]; ok && exp.rules[j].sameAs(b) && !namesAny(b.match, changed) {
			stopAt[i] = j
		}
	}
	stopAt[len(base.rules)] = int32(len(exp.rules))
	return stopAt
}

// changedLists names the lists exp uses with other content than base's
// list of that name (or that base lacks): a rule naming one decides
// otherwise than its twin by text, so it is no twin.
func changedLists(exp, base *CompiledPolicy) []string {
	var out []string
	for name, l := range exp.src.Lists {
		if b, ok := base.src.Lists[name]; !ok || b.Hash != l.Hash || b.Kind != l.Kind {
			out = append(out, name)
		}
	}
	return out
}

// namesAny reports whether match may name one of lists. It looks for the
// name as text, which may find more rules than name the list (they are
// then evaluated, not assumed): never fewer.
func namesAny(match string, lists []string) bool {
	for _, name := range lists {
		if strings.Contains(match, name) {
			return true
		}
	}
	return false
}

// sameAs reports whether r and o evaluate alike on every request: the
// same match compiled under the same options (the rules of a node's live
// policy and experiments are), with the same action, at the same place in
// the (priority, name) order.
func (r *compiledRule) sameAs(o *compiledRule) bool {
	return r.name == o.name && r.priority == o.priority && r.verdict == o.verdict && r.match == o.match
}

// Evaluate decides req with every experiment, given base's decision of the
// same request, into out (grown as needed) in the order the experiments
// were given. Each result is identical to that experiment's Evaluate(req).
func (s *DeltaSet) Evaluate(req *Request, base Decision, out []Decision) []Decision {
	if cap(out) < len(s.exps) {
		out = make([]Decision, len(s.exps))
	}
	out = out[:len(s.exps)]
	s.evaluate(req, base, out)
	return out
}

// basePosition is the position of base's deciding rule (the number of base
// rules for the default action), or -1 when the decision proves nothing:
// it carries an error or is from another version.
func (s *DeltaSet) basePosition(base Decision) int {
	if s.basePos == nil || base.Etag != s.baseEtag || base.Error != "" {
		return -1
	}
	if base.Rule == "" {
		return s.nBase
	}
	if p, ok := s.basePos[base.Rule]; ok {
		return int(p)
	}
	return -1
}

// evaluate fills out, of len(s.exps).
func (s *DeltaSet) evaluate(req *Request, base Decision, out []Decision) {
	p := s.basePosition(base)
	w := walk{s: s, out: out, p: p}
	if len(s.exps) > len(w.done)*64 {
		w.more = make([]uint64, (len(s.exps)+63)/64)
	}
	for i := range s.exps {
		e := &s.exps[i]
		switch stop := w.stop(i); {
		case stop < 0:
			out[i] = e.cp.Evaluate(req)
			w.finish(i)
		case e.first < stop:
			w.pending++
		}
	}
	if w.pending > 0 {
		w.changed(req)
	}
	for i := range s.exps {
		if !w.isDone(i) {
			w.decideAtStop(i)
		}
	}
}

// walk is the state of one DeltaSet evaluation.
//
// The request is an argument of the methods rather than a field: the pooled
// state of a CEL evaluation keeps it, so it leaks to the heap, and escape
// analysis, which does not tell fields apart, would move the walk (and the
// out slice of Delta.Evaluate) there with it.
type walk struct {
	s   *DeltaSet
	out []Decision
	p   int // base position, or -1
	// done: bit i is set once out[i] is final; more replaces it when
	// there are more experiments than it holds. (A slice of done itself
	// would point into the walk and move it to the heap.)
	done [4]uint64
	more []uint64
	// pending counts the experiments with changed rules before their stop
	// that have not decided: the walk ends when it reaches 0.
	pending int
	// skipped is each experiment's first error of a rule skipped by
	// on_error = skip (made when the first one occurs).
	skipped []string
}

// stop is the position in experiment i before which its changed rules may
// decide: the twin of the base's deciding rule. -1: evaluate in full.
func (w *walk) stop(i int) int32 {
	if w.p < 0 {
		return -1
	}
	return w.s.stops[w.p*len(w.s.exps)+i].pos
}

func (w *walk) finish(i int) {
	if w.more != nil {
		w.more[i/64] |= 1 << (uint(i) % 64)
		return
	}
	w.done[i/64] |= 1 << (uint(i) % 64)
}

func (w *walk) isDone(i int) bool {
	if w.more != nil {
		return w.more[i/64]&(1<<(uint(i)%64)) != 0
	}
	return w.done[i/64]&(1<<(uint(i)%64)) != 0
}

func (w *walk) skippedOf(i int) string {
	if w.skipped == nil {
		return ""
	}
	return w.skipped[i]
}

// decideAtStop sets experiment i's decision when nothing before its stop
// matched: the rule at the stop, which matches, or the default action.
func (w *walk) decideAtStop(i int) {
	st, e := &w.s.stops[w.p*len(w.s.exps)+i], &w.s.exps[i]
	w.out[i] = Decision{Verdict: st.verdict, Rule: st.rule, Policy: e.resource, Etag: e.etag, Error: w.skippedOf(i)}
}

// changed evaluates the changed rules before each experiment's stop, in
// order, until one decides for it. The union's index is walked as Evaluate
// walks a policy's, so that changed rules it rules out are not evaluated
// and those it decides need no CEL.
func (w *walk) changed(req *Request) {
	s := w.s
	if s.ix == nil {
		for k := range s.union {
			if w.visit(req, k, false, false) && w.pending == 0 {
				return
			}
		}
		return
	}
	// The index lends scratch space from an evaluation's state, which no
	// experiment's program sees.
	scratch := evaluation{req: req}
	defer scratch.release()
	var c cursor
	s.ix.candidates(&c, req, &scratch)
	for k := c.next(&scratch); k >= 0; k = c.next(&scratch) {
		if w.visit(req, k, c.decided(k), c.known(k)) && w.pending == 0 {
			return
		}
	}
}

// visit evaluates union member k for its experiment, unless that one is
// decided or k is not before its stop; it reports whether it decided.
func (w *walk) visit(req *Request, k int, decided, known bool) bool {
	m := w.s.union[k]
	i := int(m.exp)
	if w.isDone(i) || m.pos >= w.stop(i) {
		return false
	}
	cp := w.s.exps[i].cp
	if decided {
		r := &cp.rules[m.pos]
		w.out[i] = cp.decision(r.verdict, r.name, w.skippedOf(i))
	} else {
		ev := evaluation{cp: cp, req: req, skipped: w.skippedOf(i)}
		d, ok := ev.try(int(m.pos), known)
		ev.release()
		if ev.skipped != "" && w.skippedOf(i) == "" {
			if w.skipped == nil {
				w.skipped = make([]string, len(w.s.exps))
			}
			w.skipped[i] = ev.skipped
		}
		if !ok {
			return false
		}
		w.out[i] = d
	}
	w.finish(i)
	w.pending--
	return true
}

// Delta is a DeltaSet of one experiment.
type Delta struct{ set *DeltaSet }

// NewDelta prepares exp's evaluation from base's decisions (NewDeltaSet).
func NewDelta(exp, base *CompiledPolicy) *Delta {
	return &Delta{set: NewDeltaSet(base, []*CompiledPolicy{exp})}
}

// Evaluate decides req with the experiment, given base's decision of the
// same request. The result is identical to the experiment's Evaluate(req).
func (d *Delta) Evaluate(req *Request, base Decision) Decision {
	var out [1]Decision
	d.set.evaluate(req, base, out[:])
	return out[0]
}
