package preview_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// craftedTraffic returns n varied requests from a fixed seed.
func craftedTraffic(n int) []*engine.Request {
	rng := rand.New(rand.NewPCG(1, 2))
	paths := []string{"/", "/admin", "/admin/users", "/shop", "/static/a.css", "/api/v1/x"}
	ips := []string{"192.0.2.10", "198.51.100.7", "203.0.113.9", "2001:db8::1"}
	out := make([]*engine.Request, n)
	for i := range out {
		r := req([]string{"GET", "POST", "DELETE"}[rng.IntN(3)], []string{"http", "https"}[rng.IntN(2)],
			paths[rng.IntN(len(paths))], ips[rng.IntN(len(ips))])
		h := map[string]string{"user-agent": "test"}
		if rng.IntN(3) == 0 {
			h["x-flag"] = "on"
		}
		r.Headers = engine.PairsOf(h)
		out[i] = r
	}
	return out
}

// renamedWeb decides as webPolicy but with another rule name: ruleChanged.
func renamedWeb() *policy.Policy {
	p := webPolicy()
	p.Rules[0].Name = "deny-admin-v2"
	return p
}

// erroringWeb has a rule that fails at run time without x-flag (on_error deny).
func erroringWeb() *policy.Policy {
	p := webPolicy()
	p.Rules = append(p.Rules, policy.Rule{Name: "flag-must-be-on", Priority: 10, Action: policy.ActionAllow,
		Match: "request.headers['x-flag'] == 'on'"})
	return p
}

// expected computes the stats of exp over reqs by evaluating both
// policies directly, with the definitions of CONTRACT §4.
func expected(t *testing.T, live, exp *policy.Policy, reqs []*engine.Request) (preview.Counts, map[string]uint64) {
	var c preview.Counts
	trans := map[string]uint64{}
	tallyDirect(&c, trans, compile(t, live), compile(t, exp), reqs)
	return c, trans
}

// tallyDirect adds to c and trans the outcomes of reqs under live and exp.
func tallyDirect(c *preview.Counts, trans map[string]uint64, lc, ec *engine.CompiledPolicy, reqs []*engine.Request) {
	for _, r := range reqs {
		l, e := lc.Evaluate(r), ec.Evaluate(r)
		c.Evaluated++
		if e.Error != "" {
			c.Errors++
		}
		switch {
		case l.Verdict == e.Verdict && l.Rule == e.Rule:
			c.Unchanged++
			continue
		case l.Verdict == engine.Allow && e.Verdict == engine.Deny:
			c.AllowToDeny++
		case l.Verdict == engine.Deny && e.Verdict == engine.Allow:
			c.DenyToAllow++
		default:
			c.RuleChanged++
		}
		trans[fmt.Sprint(l.Rule, "|", e.Rule, "|", l.Verdict, "|", e.Verdict)]++
	}
}

func TestShadowCountsMatchDirectEvaluation(t *testing.T) {
	reqs := craftedTraffic(3000)
	h := newHarness(t, preview.Config{QueueSize: len(reqs), Workers: 3}, webPolicy())
	var exps []*preview.Experiment
	for i, p := range []*policy.Policy{tightWeb(), renamedWeb(), erroringWeb(), preview.NoOp(webPolicy(), "web")} {
		exps = append(exps, start(t, create(t, exps, fmt.Sprintf("e%d", i), p), t0))
	}
	h.set(exps...)
	h.offer("web", reqs...)
	for i, p := range []*policy.Policy{tightWeb(), renamedWeb(), erroringWeb(), preview.NoOp(webPolicy(), "web")} {
		want, wantTrans := expected(t, webPolicy(), p, reqs)
		got := h.stats(exps[i])
		if got.Counts != want {
			t.Errorf("%s: counts\n got %+v\nwant %+v", exps[i].Name, got.Counts, want)
		}
		gotTrans := map[string]uint64{}
		for _, tr := range got.Transitions {
			gotTrans[fmt.Sprint(tr.LiveRule, "|", tr.ExperimentRule, "|", tr.LiveDecision, "|", tr.ExperimentDecision)] = tr.Count
		}
		if fmt.Sprint(gotTrans) != fmt.Sprint(wantTrans) {
			t.Errorf("%s: transitions\n got %v\nwant %v", exps[i].Name, gotTrans, wantTrans)
		}
		if got.Replayed.Evaluated != 0 {
			t.Errorf("%s: live traffic counted as replayed", exps[i].Name)
		}
	}
	if st := h.stats(exps[1]); st.RuleChanged == 0 || st.AllowToDeny+st.DenyToAllow != 0 {
		t.Errorf("the renamed rule must show as ruleChanged only: %+v", st.Counts)
	}
	if st := h.stats(exps[2]); st.Errors == 0 {
		t.Error("the erroring experiment counted no errors")
	}
}

// Experiments are evaluated from the live decision (engine.Delta). After
// a generation switch the counts must still be those of direct evaluation
// against whichever live version answered each request: the new one, or
// the old one for a request answered just before the switch.
func TestShadowCountsAcrossLiveSwitch(t *testing.T) {
	reqs := craftedTraffic(1000)
	h := newHarness(t, preview.Config{QueueSize: 2 * len(reqs)}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	h.offer("web", reqs[:500]...)
	old := h.live["web"]
	h.live["web"] = compile(t, renamedWeb())
	h.sh.SetLive(2, h.live)
	for _, r := range reqs[500:600] { // answered by the old generation, offered after the switch
		h.sh.Offer("web", old.Evaluate(r), r)
		h.sent++
	}
	h.offer("web", reqs[600:]...)
	var want preview.Counts
	exp, trans := compile(t, tightWeb()), map[string]uint64{}
	tallyDirect(&want, trans, old, exp, reqs[:600])
	tallyDirect(&want, trans, h.live["web"], exp, reqs[600:])
	if got := h.stats(e).Counts; got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestShadowMirrorComputesLiveDecision(t *testing.T) {
	reqs := craftedTraffic(500)
	h := newHarness(t, preview.Config{QueueSize: len(reqs)}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	for _, r := range reqs {
		h.sh.Mirror("web", r)
	}
	h.sent += uint64(len(reqs))
	h.wait()
	want, _ := expected(t, webPolicy(), tightWeb(), reqs)
	if got := h.stats(e).Counts; got != want {
		t.Fatalf("mirrored: got %+v want %+v", got, want)
	}
}

// With the workers asleep and a tiny queue, Offer from many goroutines
// must return at once, every request must be either queued or counted as
// dropped, and each ACTIVE experiment must count every drop.
func TestShadowFullQueueDropsAndNeverBlocks(t *testing.T) {
	h := newHarness(t, preview.Config{QueueSize: 8, Workers: 1, PollInterval: time.Hour}, webPolicy())
	a := start(t, create(t, nil, "a", tightWeb()), t0)
	b := start(t, create(t, []*preview.Experiment{a}, "b", renamedWeb()), t0)
	h.set(a, b)
	time.Sleep(10 * time.Millisecond) // let the worker go to sleep
	const goroutines, each = 8, 2000
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	d := h.live["web"].Evaluate(req("GET", "https", "/", "198.51.100.1"))
	for range goroutines {
		wg.Go(func() {
			r := req("GET", "https", "/", "198.51.100.1")
			var worst time.Duration
			for range each {
				start := time.Now()
				h.sh.Offer("web", d, r)
				worst = max(worst, time.Since(start))
			}
			mu.Lock()
			slowest = max(slowest, worst)
			mu.Unlock()
		})
	}
	wg.Wait()
	st := h.sh.Status()
	if st.Queued+int(st.Dropped) != goroutines*each || st.Dropped < goroutines*each-8 {
		t.Fatalf("status %+v: want %d offered, all but the 8 queued dropped", st, goroutines*each)
	}
	if slowest > 100*time.Millisecond {
		t.Errorf("slowest Offer took %v", slowest)
	}
	for _, e := range []*preview.Experiment{a, b} {
		if got := h.stats(e).Dropped; got != st.Dropped {
			t.Errorf("%s dropped %d, want %d", e.Name, got, st.Dropped)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.sh.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st := h.sh.Status(); st.Processed+st.Dropped != goroutines*each || st.Queued != 0 || st.State != "STOPPED" {
		t.Fatalf("after Stop: %+v", st)
	}
}

func TestShadowStopDrainsWithinDeadline(t *testing.T) {
	h := newHarness(t, preview.Config{QueueSize: 1000, Workers: 1}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	reqs := craftedTraffic(1000)
	for _, r := range reqs {
		h.sh.Offer("web", h.live["web"].Evaluate(r), r)
	}
	if err := h.sh.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.stats(e).Evaluated + h.stats(e).Dropped; got != 1000 {
		t.Fatalf("after Stop evaluated+dropped = %d, want 1000", got)
	}
	h.sh.Offer("web", engine.Decision{}, reqs[0]) // after Stop: dropped, not blocked
	if st := h.sh.Status(); st.Dropped == 0 && h.stats(e).Dropped == 0 {
		t.Fatalf("an Offer after Stop was not counted as dropped: %+v", st)
	}
}

func TestShadowStopDeadlineAbandonsQueue(t *testing.T) {
	h := newHarness(t, preview.Config{QueueSize: 50_000, Workers: 1}, webPolicy())
	var exps []*preview.Experiment
	for i := range 10 {
		exps = append(exps, start(t, create(t, exps, fmt.Sprintf("e%d", i), tightWeb()), t0))
	}
	h.set(exps...)
	reqs := craftedTraffic(50_000)
	for _, r := range reqs {
		h.sh.Offer("web", engine.Decision{Verdict: engine.Allow}, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := h.sh.Stop(ctx); err == nil {
		t.Skip("the machine drained 500,000 evaluations within 1ms")
	}
	if st := h.sh.Status(); st.Processed+st.Dropped != uint64(len(reqs)) {
		t.Fatalf("abandoned requests must be counted as dropped: %+v", st)
	}
}

func TestShadowStatsKeptPerEtagAndDroppedForDeletedExperiments(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	u, _ := preview.Update(e, preview.UpdateRequest{Policy: renamedWeb()}, at(1))
	u = preview.AutoStart(u, preview.Settings{AutoStart: true}, at(1))
	h.set(u)
	h.offer("web", req("GET", "https", "/admin", "198.51.100.1"))
	if old, cur := h.stats(e), h.stats(u); old.Evaluated != 1 || cur.Evaluated != 1 || cur.RuleChanged != 1 {
		t.Fatalf("per-etag stats: old %+v, new %+v", old.Counts, cur.Counts)
	}
	h.set()
	if n := len(h.sh.Stats()); n != 0 {
		t.Fatalf("%d stats kept for deleted experiments", n)
	}
}

func TestShadowReplaysRecordedTrafficForNewVersions(t *testing.T) {
	reqs := craftedTraffic(200)
	h := newHarness(t, preview.Config{QueueSize: len(reqs)}, webPolicy())
	h.offer("web", reqs...) // no experiment yet: only recorded
	h.offer("other", req("GET", "http", "/", "198.51.100.1"))
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	want, _ := expected(t, webPolicy(), tightWeb(), reqs)
	deadline := time.Now().Add(10 * time.Second)
	for h.stats(e).Replayed.Evaluated < 200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := h.stats(e)
	if st.Replayed.Counts != want || st.Evaluated != 0 {
		t.Fatalf("replayed %+v (live %+v), want %+v", st.Replayed.Counts, st.Counts, want)
	}
	if n := len(h.log.lines(t)); n != 0 {
		t.Fatalf("replays wrote %d preview log lines", n)
	}
}

func TestShadowPreviewing(t *testing.T) {
	h := newHarness(t, preview.Config{})
	fresh := webPolicy()
	fresh.Name = "fresh"
	if h.sh.Previewing("fresh") {
		t.Fatal("previewing before any experiment")
	}
	h.set(start(t, create(t, nil, "x", fresh), t0))
	if !h.sh.Previewing("fresh") || h.sh.Previewing("web") {
		t.Fatal("Previewing does not follow ACTIVE experiments")
	}
}
