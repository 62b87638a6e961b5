package preview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// registry owns the stats cells of one node, by (experiment, etag).
type registry struct {
	mu         sync.Mutex
	cells      map[cellKey]*cell
	seq        uint64
	maxSamples int
}

type cellKey struct{ name, etag string }

// keepVersions is how many etags of one experiment keep their stats, so
// a pull request comment can still compare with the previous push.
const keepVersions = 3

func newRegistry(maxSamples int) *registry {
	return &registry{cells: map[cellKey]*cell{}, maxSamples: maxSamples}
}

// get returns the cell of (name, etag), creating it; created says so.
func (r *registry) get(name, etag string) (c *cell, created bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := cellKey{name, etag}
	if c := r.cells[k]; c != nil {
		return c, false
	}
	r.seq++
	c = &cell{name: name, etag: etag, seq: r.seq, maxSamples: r.maxSamples}
	r.cells[k] = c
	return c, true
}

// retain drops the cells of experiments not in names, and all but the
// newest keepVersions etags of the others, so memory follows the set of
// experiments rather than their history.
func (r *registry) retain(names map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := map[string][]*cell{}
	for k, c := range r.cells {
		if !names[k.name] {
			delete(r.cells, k)
			continue
		}
		byName[k.name] = append(byName[k.name], c)
	}
	for _, cs := range byName {
		if len(cs) <= keepVersions {
			continue
		}
		slices.SortFunc(cs, func(a, b *cell) int { return cmp.Compare(b.seq, a.seq) })
		for _, c := range cs[keepVersions:] {
			delete(r.cells, cellKey{c.name, c.etag})
		}
	}
}

// snapshot returns every cell's stats by experiment name, newest etag
// first, with their series up to now.
func (r *registry) snapshot(now time.Time) []Stats {
	r.mu.Lock()
	cs := make([]*cell, 0, len(r.cells))
	for _, c := range r.cells {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	slices.SortFunc(cs, func(a, b *cell) int { return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(b.seq, a.seq)) })
	out := make([]Stats, len(cs))
	for i, c := range cs {
		out[i] = c.snapshot(now)
	}
	return out
}

// NodeStats is what one node reports (in its heartbeat) for merging.
type NodeStats struct {
	Node  string  `json:"node"`
	Stats []Stats `json:"stats"`
}

// Merge adds up the stats of each experiment version across nodes: counts
// and transitions summed, samples up to DefaultSamples in node order, the
// union of the windows, and one NodeCoverage per node that reported it.
// The result is in experiment, then etag, order.
func Merge(nodes ...NodeStats) []Stats { return MergeAt(time.Time{}, nodes...) }

// MergeAt is Merge by a node whose clock reads now (zero: no clock): the
// series end at now's minute (one more of grace), so that one node with
// a clock far ahead cannot move the hour off everyone else's traffic.
func MergeAt(now time.Time, nodes ...NodeStats) []Stats {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b NodeStats) int { return cmp.Compare(a.Node, b.Node) })
	acc := map[cellKey]*merged{}
	var order []cellKey
	for _, n := range nodes {
		for _, s := range n.Stats {
			k := cellKey{s.Experiment, s.ExperimentEtag}
			m := acc[k]
			if m == nil {
				m = &merged{out: Stats{Experiment: s.Experiment, ExperimentEtag: s.ExperimentEtag}}
				acc[k], order = m, append(order, k)
			}
			m.add(n.Node, s)
		}
	}
	slices.SortFunc(order, func(a, b cellKey) int { return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.etag, b.etag)) })
	out := make([]Stats, len(order))
	for i, k := range order {
		out[i] = acc[k].result(now)
	}
	return out
}

// merged accumulates one experiment version across nodes.
type merged struct {
	out           Stats
	live, replay  tally
	liveEtagSeen  time.Time
	windowPresent bool
	window        Window
	refusedBy     []string // nodes that do not evaluate the version
	refused       string   // the first of their reasons
	series        seriesAcc
}

func (m *merged) add(node string, s Stats) {
	m.live.counts.add(s.Counts)
	m.replay.counts.add(s.Replayed.Counts)
	addTransitions(&m.live, s.Transitions)
	addTransitions(&m.replay, s.Replayed.Transitions)
	for _, smp := range s.Samples {
		if len(m.out.Samples) < DefaultSamples {
			m.out.Samples = append(m.out.Samples, smp)
		}
	}
	if s.Series != nil {
		m.series.add(s.Series)
	}
	cov := NodeCoverage{Node: node, Evaluated: s.Evaluated, Replayed: s.Replayed.Evaluated, Dropped: s.Dropped,
		Window: s.Window, Refused: s.Refused}
	m.out.Nodes = append(m.out.Nodes, cov)
	if s.Refused != "" {
		m.refusedBy = append(m.refusedBy, node)
		m.refused = cmp.Or(m.refused, s.Refused)
	}
	if s.Window != nil {
		m.window.extend(s.Window.Start)
		m.window.extend(s.Window.End)
		m.windowPresent = true
		// The live etag of the node that saw traffic last is the current one.
		if s.LiveEtag != "" && !s.Window.End.Before(m.liveEtagSeen) {
			m.out.LiveEtag, m.liveEtagSeen = s.LiveEtag, s.Window.End
		}
	}
	if m.out.LiveEtag == "" {
		m.out.LiveEtag = s.LiveEtag
	}
}

func addTransitions(t *tally, ts []Transition) {
	for _, tr := range ts {
		t.addTransition(transitionKey{tr.LiveRule, tr.ExperimentRule, tr.LiveDecision, tr.ExperimentDecision}, tr.Count)
	}
}

func (m *merged) result(now time.Time) Stats {
	s := m.out
	s.Tally, s.Replayed = m.live.snapshot(), m.replay.snapshot()
	end := int64(0) // no clock: the newest minute any node reached
	if !now.IsZero() {
		end = min(m.series.last, unixMinute(now)+1)
	}
	s.Series = m.series.result(end)
	if len(m.refusedBy) > 0 {
		s.Refused = fmt.Sprintf("on %s: %s", strings.Join(m.refusedBy, ", "), m.refused)
	}
	if m.windowPresent {
		w := m.window
		s.Window = &w
	}
	return s
}

// MaxPayloadBytes bounds the stats a node sends with each heartbeat: half
// the API's default body limit, which the leader applies to the heartbeat
// as to any request. A heartbeat over it would be refused whole, and the
// node would look silent to the leader (and be left behind) for the sake
// of its preview numbers.
const MaxPayloadBytes = 512 << 10

// EncodeWithin encodes n in at most max bytes: whole when it fits, else
// without samples, else also without series, else with as many
// experiments' stats as fit (in order, halving). The chart goes before
// any experiment's counts, which verdicts and auto-stop are made from.
// trimmed reports that something was left out of this beat.
func (n NodeStats) EncodeWithin(max int) (b []byte, trimmed bool, err error) {
	return encodeWithin(n.Stats, max, func(s []Stats) any { return NodeStats{Node: n.Node, Stats: s} })
}

// EncodeMergedWithin is EncodeWithin for the leader's merge, which every
// node reads from its heartbeat's answer.
func EncodeMergedWithin(stats []Stats, max int) (b []byte, trimmed bool, err error) {
	return encodeWithin(stats, max, func(s []Stats) any { return s })
}

func encodeWithin(stats []Stats, max int, wrap func([]Stats) any) (b []byte, trimmed bool, err error) {
	if b, err = json.Marshal(wrap(stats)); err != nil || len(b) <= max {
		return b, false, err
	}
	bare := make([]Stats, len(stats))
	for i, s := range stats {
		s.Samples = nil
		bare[i] = s
	}
	if b, err = json.Marshal(wrap(bare)); err != nil || len(b) <= max {
		return b, true, err
	}
	for i := range bare {
		bare[i].Series = nil
	}
	for len(bare) > 0 {
		if b, err = json.Marshal(wrap(bare)); err != nil || len(b) <= max {
			return b, true, err
		}
		bare = bare[:len(bare)/2]
	}
	b, err = json.Marshal(wrap(bare))
	return b, true, err
}
