package preview_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
)

// clock is a settable clock for the shadow's workers.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }

func (c *clock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }
func sum(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}
func seriesOf(s preview.Stats) string { b, _ := json.Marshal(s.Series); return string(b) }

// The series counts each minute's live traffic in that minute, with
// empty minutes as zeros, and forgets minutes older than the last hour.
func TestSeriesCountsLiveTrafficPerMinute(t *testing.T) {
	clk := newClock(t0.Add(10 * time.Second))
	h := newHarness(t, preview.Config{QueueSize: 4096, Now: clk.now}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	reqs := craftedTraffic(900)
	h.offer("web", reqs[:300]...)
	clk.set(at(2).Add(30 * time.Second))
	h.offer("web", reqs[300:]...)

	st := h.stats(e)
	s := st.Series
	if s == nil {
		t.Fatalf("no series in %+v", st)
	}
	if !s.Start.Equal(t0) || s.StepSeconds != 60 || len(s.Evaluated) != 3 {
		t.Fatalf("series %s: want 3 minutes from %s", seriesOf(st), t0)
	}
	if s.Evaluated[0] != 300 || s.Evaluated[1] != 0 || s.Evaluated[2] != 600 {
		t.Errorf("evaluated per minute %v, want [300 0 600]", s.Evaluated)
	}
	if sum(s.Changed) != st.Changed() || sum(s.AllowToDeny) != st.AllowToDeny || sum(s.DenyToAllow) != st.DenyToAllow {
		t.Errorf("series %s does not add up to the counts %+v", seriesOf(st), st.Counts)
	}
	if st.AllowToDeny == 0 {
		t.Fatal("the crafted traffic changed nothing: the test proves nothing")
	}
	for _, xs := range [][]uint64{s.Changed, s.AllowToDeny, s.DenyToAllow} {
		if len(xs) != len(s.Evaluated) {
			t.Fatalf("series slices of different lengths: %s", seriesOf(st))
		}
	}

	// An hour later minute 0 is gone; minute 2 is still in the hour.
	clk.set(at(61))
	if s := h.stats(e).Series; s == nil || !s.Start.Equal(at(2)) || len(s.Evaluated) != 60 || s.Evaluated[0] != 600 {
		t.Errorf("an hour on: %s, want 60 minutes from %s starting with 600", seriesOf(h.stats(e)), at(2))
	}
	clk.set(at(200))
	if s := h.stats(e).Series; s != nil {
		t.Errorf("hours after the last request: %s, want none", seriesOf(h.stats(e)))
	}
}

// Replayed traffic happened before the experiment ran: it is counted
// apart and has no place in the series.
func TestSeriesLeavesReplayedTrafficOut(t *testing.T) {
	h := newHarness(t, preview.Config{QueueSize: 4096}, webPolicy())
	h.offer("web", craftedTraffic(200)...) // recorded, nothing ACTIVE
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	waitReplayed(t, h, e)
	if st := h.stats(e); st.Series != nil {
		t.Errorf("replayed traffic in the series: %s", seriesOf(st))
	}
}

func waitReplayed(t *testing.T, h *harness, e *preview.Experiment) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.stats(e).Replayed.Evaluated < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing replayed: %+v", h.stats(e).Replayed.Counts)
		}
		time.Sleep(time.Millisecond)
	}
}

func seriesStats(node string, start time.Time, evaluated ...uint64) preview.NodeStats {
	n := len(evaluated)
	s := &preview.Series{Start: start, StepSeconds: 60, Evaluated: evaluated,
		Changed: make([]uint64, n), AllowToDeny: make([]uint64, n), DenyToAllow: make([]uint64, n)}
	for i, v := range evaluated {
		s.Changed[i], s.AllowToDeny[i] = v/2, v/2
	}
	return preview.NodeStats{Node: node, Stats: []preview.Stats{{
		Experiment: "policies/web/experiments/x", ExperimentEtag: "e1", Series: s}}}
}

// Nodes' series are added minute by minute: a node whose snapshot was
// taken a minute later shifts nothing, and the merge keeps the last hour
// up to the newest minute any node reported.
func TestMergeAddsSeriesByMinute(t *testing.T) {
	got := preview.Merge(
		seriesStats("n1", at(0), 10, 20, 30),
		seriesStats("n2", at(1), 1, 2, 3),
	)
	s := got[0].Series
	if s == nil || !s.Start.Equal(at(0)) || fmt.Sprint(s.Evaluated) != "[10 21 32 3]" || fmt.Sprint(s.AllowToDeny) != "[5 10 16 1]" {
		t.Fatalf("merged %s, want evaluated [10 21 32 3] from %s", seriesOf(got[0]), at(0))
	}
	// n2 is an hour ahead of n1's first minute: n1's first minute is out.
	late := make([]uint64, 60)
	late[59] = 7
	got = preview.Merge(seriesStats("n1", at(0), 10, 20, 30), seriesStats("n2", at(1), late...))
	s = got[0].Series
	if s == nil || !s.Start.Equal(at(1)) || len(s.Evaluated) != 60 || s.Evaluated[0] != 20 || s.Evaluated[59] != 7 {
		t.Fatalf("merged %s, want 60 minutes from %s", seriesOf(got[0]), at(1))
	}
	// A malformed series from a node (slices of other lengths, another
	// step, too long) is left out rather than trusted.
	bad := seriesStats("n3", at(0), 5, 5)
	bad.Stats[0].Series.Changed = []uint64{1}
	long := seriesStats("n4", at(0), make([]uint64, 500)...)
	coarse := seriesStats("n5", at(0), 9)
	coarse.Stats[0].Series.StepSeconds = 300
	// A clock far off would move the merge's hour off everyone's, and a
	// year past 9999 does not encode as JSON at all.
	future := seriesStats("n6", time.Date(9999, 12, 31, 23, 30, 0, 0, time.UTC), make([]uint64, 60)...)
	future.Stats[0].Series.Evaluated[0] = 1
	got = preview.Merge(seriesStats("n1", at(0), 10), bad, long, coarse, future)
	if s := got[0].Series; s == nil || fmt.Sprint(s.Evaluated) != "[10]" {
		t.Fatalf("merged %s, want only n1's [10]", seriesOf(got[0]))
	}
	if _, _, err := preview.EncodeMergedWithin(got, 1<<20); err != nil {
		t.Fatalf("the merge does not encode: %v", err)
	}
}

// The leader's merge ends its hour at the leader's minute (one minute of
// grace for clocks a little ahead): a node whose clock runs a day ahead
// does not push every other node's traffic out of the hour.
func TestMergeAtEndsAtTheLeadersMinute(t *testing.T) {
	ahead := make([]uint64, 60)
	ahead[59] = 7
	got := preview.MergeAt(at(2), seriesStats("n1", at(0), 10, 20, 30), seriesStats("n2", at(24*60-59), ahead...))
	s := got[0].Series
	if s == nil || !s.Start.Equal(at(0)) || fmt.Sprint(s.Evaluated) != "[10 20 30 0]" {
		t.Fatalf("merged at %s: %s, want n1's [10 20 30] and the minute of grace from %s", at(2), seriesOf(got[0]), at(0))
	}
	got = preview.MergeAt(at(2), seriesStats("n1", at(0), 10, 20, 30), seriesStats("n2", at(1), 1, 2, 3))
	if s := got[0].Series; s == nil || fmt.Sprint(s.Evaluated) != "[10 21 32 3]" {
		t.Fatalf("a node a minute ahead: %s, want [10 21 32 3]", seriesOf(got[0]))
	}
}

// Over the heartbeat budget, samples go first, then the series, and only
// then whole experiments: the chart is worth less than the counts a
// verdict is made from. The trimming is the same for the same input.
func TestEncodeWithinDropsSeriesBeforeExperiments(t *testing.T) {
	var ns preview.NodeStats
	ns.Node = "n1"
	full := make([]uint64, 60)
	for i := range full {
		full[i] = 123456
	}
	for i := range 100 {
		s := seriesStats("n1", at(0), full...).Stats[0]
		s.Experiment = fmt.Sprintf("policies/web/experiments/x%03d", i)
		s.Samples = []preview.Sample{{LiveDecision: engine.Allow, ExperimentDecision: engine.Deny}}
		ns.Stats = append(ns.Stats, s)
	}
	whole, _, _ := ns.EncodeWithin(1 << 30)
	b, trimmed, err := ns.EncodeWithin(len(whole) / 4)
	if err != nil || !trimmed || len(b) > len(whole)/4 {
		t.Fatalf("%d bytes (budget %d), trimmed %v, err %v", len(b), len(whole)/4, trimmed, err)
	}
	var got preview.NodeStats
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Stats) != 100 {
		t.Fatalf("%d experiments kept of 100: the series should have gone first", len(got.Stats))
	}
	for _, s := range got.Stats {
		if s.Series != nil || s.Samples != nil {
			t.Fatalf("%s kept its series or samples", s.Experiment)
		}
	}
	again, _, _ := ns.EncodeWithin(len(whole) / 4)
	if string(again) != string(b) {
		t.Error("the same stats trimmed differently")
	}
}

// FuzzMergeSeries: whatever series a node's heartbeat carries, the merge
// holds at most the hour, its slices agree, it adds up to no more than
// what the nodes sent, and it still encodes as JSON (which a year past
// 9999 once made fail for every experiment at once).
func FuzzMergeSeries(f *testing.F) {
	f.Add([]byte(`{"node":"n2","stats":[{"experiment":"policies/web/experiments/x","experimentEtag":"e1","series":{"start":"2025-06-01T12:00:00Z","stepSeconds":60,"evaluated":[1,2],"changed":[1,0],"allowToDeny":[1,0],"denyToAllow":[0,0]}}]}`))
	f.Add([]byte(`{"node":"n2","stats":[{"experiment":"policies/web/experiments/x","experimentEtag":"e1","series":{"start":"9999-12-31T23:59:00Z","stepSeconds":60,"evaluated":[1],"changed":[0],"allowToDeny":[0],"denyToAllow":[0]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ns preview.NodeStats
		if json.Unmarshal(data, &ns) != nil {
			return
		}
		ns.Node = "n2"
		got := preview.Merge(seriesStats("n1", at(0), 10, 20), ns)
		for _, s := range got {
			sr := s.Series
			if sr == nil {
				continue
			}
			n := len(sr.Evaluated)
			if n == 0 || n > preview.SeriesMinutes || len(sr.Changed) != n || len(sr.AllowToDeny) != n || len(sr.DenyToAllow) != n {
				t.Fatalf("merged series of %d/%d/%d/%d points", n, len(sr.Changed), len(sr.AllowToDeny), len(sr.DenyToAllow))
			}
		}
		if _, _, err := preview.EncodeMergedWithin(got, 2*preview.MaxPayloadBytes); err != nil {
			t.Fatalf("the merge does not encode: %v", err)
		}
	})
}
