package preview

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// Counts are the outcomes of evaluating one experiment beside the live
// policy. Every evaluation is exactly one of Unchanged, AllowToDeny,
// DenyToAllow and RuleChanged (same decision, another rule); Errors
// counts experiment decisions that carry a run-time error, and Dropped
// the requests the bounded queue had no room for.
type Counts struct {
	Evaluated   uint64 `json:"evaluated"`
	Unchanged   uint64 `json:"unchanged"`
	AllowToDeny uint64 `json:"allowToDeny"`
	DenyToAllow uint64 `json:"denyToAllow"`
	RuleChanged uint64 `json:"ruleChanged"`
	Errors      uint64 `json:"errors"`
	Dropped     uint64 `json:"dropped"`
}

func (c *Counts) add(o Counts) {
	c.Evaluated += o.Evaluated
	c.Unchanged += o.Unchanged
	c.AllowToDeny += o.AllowToDeny
	c.DenyToAllow += o.DenyToAllow
	c.RuleChanged += o.RuleChanged
	c.Errors += o.Errors
	c.Dropped += o.Dropped
}

// Changed is how many evaluations differed from the live policy.
func (c Counts) Changed() uint64 { return c.AllowToDeny + c.DenyToAllow + c.RuleChanged }

// Transition counts evaluations that went from one (rule, decision) of
// the live policy to another of the experiment. Only changes are counted;
// Unchanged covers the rest. Rule "" is the default action.
type Transition struct {
	LiveRule           string         `json:"liveRule"`
	ExperimentRule     string         `json:"experimentRule"`
	LiveDecision       engine.Verdict `json:"liveDecision"`
	ExperimentDecision engine.Verdict `json:"experimentDecision"`
	Count              uint64         `json:"count"`
}

type transitionKey struct {
	liveRule, expRule       string
	liveVerdict, expVerdict engine.Verdict
}

// OtherRule stands for both rules of transitions past the per-experiment
// bound, which keeps memory bounded when two large policies disagree a lot.
const OtherRule = "(other)"

// maxTransitions bounds distinct transitions kept per tally.
const maxTransitions = 256

// Tally is Counts with the transitions behind them.
type Tally struct {
	Counts
	Transitions []Transition `json:"transitions"`
}

// Window is the time span of the traffic behind some stats.
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

func (w *Window) extend(t time.Time) {
	if w.Start.IsZero() || t.Before(w.Start) {
		w.Start = t
	}
	if t.After(w.End) {
		w.End = t
	}
}

// Sample is one changed request, redacted, for people to look at.
type Sample struct {
	Time               time.Time      `json:"time"`
	LiveDecision       engine.Verdict `json:"liveDecision"`
	LiveRule           string         `json:"liveRule"`
	ExperimentDecision engine.Verdict `json:"experimentDecision"`
	ExperimentRule     string         `json:"experimentRule"`
	Replayed           bool           `json:"replayed,omitempty"`
	Request            map[string]any `json:"request"`
}

// NodeCoverage is how much of an experiment's traffic one node saw.
type NodeCoverage struct {
	Node      string  `json:"node"`
	Evaluated uint64  `json:"evaluated"`
	Replayed  uint64  `json:"replayed"`
	Dropped   uint64  `json:"dropped"`
	Window    *Window `json:"window,omitempty"`
	// Refused says why the node does not evaluate the experiment (over
	// its budget preview.max_compiled_bytes, or not compiling there).
	Refused string `json:"refused,omitempty"`
}

// Stats is the CONTRACT §4 `stats` of one experiment version (experiment
// name and etag): live-mirrored counts at the top level, replayed ones
// apart, samples, the window of live traffic and, once merged across
// nodes, per-node coverage.
type Stats struct {
	Experiment     string `json:"experiment"`
	ExperimentEtag string `json:"experimentEtag"`
	LiveEtag       string `json:"liveEtag,omitempty"`
	Tally
	Replayed Tally    `json:"replayed"`
	Samples  []Sample `json:"samples,omitempty"`
	Window   *Window  `json:"window,omitempty"`
	// Series is the last hour of live traffic, minute by minute (absent
	// when there was none, or when it did not fit a heartbeat's budget).
	Series *Series        `json:"series,omitempty"`
	Nodes  []NodeCoverage `json:"nodes,omitempty"`
	// Refused, when some node does not evaluate this version, says which
	// and why: a node's own stats give its reason, merged ones prefix
	// the nodes' ids ("on n1, n2: ...", the first node's reason).
	Refused string `json:"refused,omitempty"`
}

// tally accumulates Counts and transitions.
type tally struct {
	counts Counts
	trans  map[transitionKey]uint64
}

// add counts one evaluation and reports whether it changed anything.
func (t *tally) add(live, exp engine.Decision) bool {
	t.counts.Evaluated++
	if exp.Error != "" {
		t.counts.Errors++
	}
	switch {
	case live.Verdict == exp.Verdict && live.Rule == exp.Rule:
		t.counts.Unchanged++
		return false
	case live.Verdict == engine.Allow && exp.Verdict == engine.Deny:
		t.counts.AllowToDeny++
	case live.Verdict == engine.Deny && exp.Verdict == engine.Allow:
		t.counts.DenyToAllow++
	default:
		t.counts.RuleChanged++
	}
	t.addTransition(transitionKey{live.Rule, exp.Rule, live.Verdict, exp.Verdict}, 1)
	return true
}

func (t *tally) addTransition(k transitionKey, n uint64) {
	if t.trans == nil {
		t.trans = map[transitionKey]uint64{}
	}
	if _, ok := t.trans[k]; !ok && len(t.trans) >= maxTransitions {
		k.liveRule, k.expRule = OtherRule, OtherRule
	}
	t.trans[k] += n
}

// snapshot renders the tally, transitions by count, most first.
func (t *tally) snapshot() Tally {
	out := Tally{Counts: t.counts, Transitions: []Transition{}}
	for k, n := range t.trans {
		out.Transitions = append(out.Transitions, Transition{
			LiveRule: k.liveRule, ExperimentRule: k.expRule,
			LiveDecision: k.liveVerdict, ExperimentDecision: k.expVerdict, Count: n,
		})
	}
	sortTransitions(out.Transitions)
	return out
}

func sortTransitions(ts []Transition) {
	slices.SortFunc(ts, func(a, b Transition) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.LiveRule, b.LiveRule),
			cmp.Compare(a.ExperimentRule, b.ExperimentRule),
			cmp.Compare(a.LiveDecision, b.LiveDecision), cmp.Compare(a.ExperimentDecision, b.ExperimentDecision))
	})
}

// cell holds the stats of one (experiment, etag). Workers update it under
// mu; the live path only ever touches dropped, atomically.
type cell struct {
	name, etag string
	seq        uint64 // creation order, to keep the newest versions
	dropped    atomic.Uint64

	mu         sync.Mutex
	live       tally
	replayed   tally
	liveEtag   string
	samples    []Sample
	maxSamples int
	window     Window
	minutes    minutes // the last hour of live traffic, for Series
	unchanged  uint64  // unchanged live evaluations, for log sampling
	refused    string  // why this node does not evaluate the version
}

// setRefused records why the node does not evaluate the version ("":
// it does).
func (c *cell) setRefused(reason string) {
	c.mu.Lock()
	c.refused = reason
	c.mu.Unlock()
}

// maxSamplesPerTransition spreads samples over different transitions.
const maxSamplesPerTransition = 3

// observe counts one evaluation. It returns whether the decision changed
// and, for unchanged live ones, whether this is the 1-in-every one to log.
func (c *cell) observe(live, exp engine.Decision, req *engine.Request, at time.Time,
	replayed bool, red *Redactor, every int) (changed, logUnchanged bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &c.live
	if replayed {
		t = &c.replayed
	} else {
		c.window.extend(at)
		c.liveEtag = live.Etag
		c.minutes.add(at, live, exp)
	}
	if !t.add(live, exp) {
		if !replayed {
			c.unchanged++
			logUnchanged = every > 0 && (c.unchanged-1)%uint64(every) == 0
		}
		return false, logUnchanged
	}
	c.keepSample(live, exp, req, at, replayed, red)
	return true, false
}

// keepSample keeps the first few changed requests of each transition, up
// to maxSamples, redacting them now so the raw request is never retained.
func (c *cell) keepSample(live, exp engine.Decision, req *engine.Request, at time.Time, replayed bool, red *Redactor) {
	if len(c.samples) >= c.maxSamples {
		return
	}
	same := 0
	for i := range c.samples {
		s := &c.samples[i]
		if s.LiveRule == live.Rule && s.ExperimentRule == exp.Rule &&
			s.LiveDecision == live.Verdict && s.ExperimentDecision == exp.Verdict {
			same++
		}
	}
	if same >= maxSamplesPerTransition {
		return
	}
	c.samples = append(c.samples, Sample{
		Time: at, LiveDecision: live.Verdict, LiveRule: live.Rule,
		ExperimentDecision: exp.Verdict, ExperimentRule: exp.Rule, Replayed: replayed,
		Request: red.Request(req),
	})
}

// snapshot renders the cell's stats, with the series of the hour up to
// now (none when now is zero).
func (c *cell) snapshot(now time.Time) Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		Experiment: c.name, ExperimentEtag: c.etag, LiveEtag: c.liveEtag,
		Tally: c.live.snapshot(), Replayed: c.replayed.snapshot(),
		Samples: slices.Clone(c.samples), Refused: c.refused, Series: c.minutes.series(now),
	}
	s.Dropped = c.dropped.Load()
	if !c.window.Start.IsZero() {
		w := c.window
		s.Window = &w
	}
	return s
}
