package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestSweepMarksFailedOnce: a node past the timeout is reported failed
// once, not at every sweep, and reported back once it beats again; a node
// that said TERMINATED is not a failure.
func TestSweepMarksFailedOnce(t *testing.T) {
	now := time.Unix(100, 0)
	h := newHeartbeats(func() time.Time { return now }, 2*time.Second)
	h.record(Heartbeat{ID: "a"})
	h.record(Heartbeat{ID: "t", Status: &NodeStatus{State: "TERMINATED"}})
	if failed, back := h.sweep(); len(failed)+len(back) != 0 {
		t.Fatalf("fresh: %v %v", failed, back)
	}
	now = now.Add(2 * time.Second)
	if failed, _ := h.sweep(); !slices.Equal(failed, []string{"a"}) {
		t.Fatalf("past the timeout: %v", failed)
	}
	if failed, _ := h.sweep(); len(failed) != 0 {
		t.Fatalf("reported twice: %v", failed)
	}
	h.record(Heartbeat{ID: "a"})
	if _, back := h.sweep(); !slices.Equal(back, []string{"a"}) {
		t.Fatalf("back: %v", back)
	}
}

// TestSweepLagsOnce: a node that stops following is reported once, not at
// every sweep, and once more when it follows again.
func TestSweepLagsOnce(t *testing.T) {
	now := time.Unix(100, 0)
	h := newHeartbeats(func() time.Time { return now }, 2*time.Second)
	h.followTimeout = 5 * time.Second
	at := func(i uint64) *uint64 { return &i }
	h.record(Heartbeat{ID: "s"})
	h.observeApplied("s", at(7), 8) // mark: 8, which s has not reached
	h.observeApplied("s", at(7), 9)
	now = now.Add(4 * time.Second)
	if lagging, back := h.sweepLags(); len(lagging)+len(back) != 0 {
		t.Fatalf("within the follow timeout: %v %v", lagging, back)
	}
	now = now.Add(time.Second)
	lagging, _ := h.sweepLags()
	if l, ok := lagging["s"]; len(lagging) != 1 || !ok || l.LeaderIndex != 8 || l.AppliedIndex != 7 || !l.Since.Equal(time.Unix(100, 0)) {
		t.Fatalf("past the follow timeout: %+v", lagging)
	}
	if lagging, _ := h.sweepLags(); len(lagging) != 0 {
		t.Fatalf("reported twice: %v", lagging)
	}
	h.observeApplied("s", at(9), 9)
	if _, back := h.sweepLags(); !slices.Equal(back, []string{"s"}) {
		t.Fatalf("back: %v", back)
	}
	// Silent longer than the window (restarted), back behind: a new mark,
	// so the follow timeout counts from now.
	now = now.Add(time.Minute)
	for range 5 { // heartbeats within the window from now on
		h.observeApplied("s", at(9), 20)
		if l := h.lag("s"); l != nil {
			t.Fatalf("a node back from a silence is judged from before it: %+v", l)
		}
		now = now.Add(time.Second)
	}
	h.observeApplied("s", at(9), 20)
	if l := h.lag("s"); l == nil || l.LeaderIndex != 20 {
		t.Fatalf("past the follow timeout since it came back: %+v", l)
	}
}

// TestSettingsDiffAndBounds: every differing setting is named, and a join
// request cannot carry unbounded settings.
func TestSettingsDiffAndBounds(t *testing.T) {
	d := Settings{"a": "1", "b": "2"}.Diff(Settings{"a": "1", "b": "3", "c": "4"})
	if len(d) != 2 || d[0] != `b is "2" on this node, "3" on the leader` || d[1] != `c is "" on this node, "4" on the leader` {
		t.Fatalf("diff = %q", d)
	}
	big := map[string]string{}
	for i := range maxSettings + 1 {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "x"
	}
	if checkSettings(big) == nil || checkSettings(map[string]string{"k": string(make([]byte, maxScopeLen+1))}) == nil {
		t.Fatal("unbounded settings accepted")
	}
	if err := checkSettings(map[string]string{"policy.merge_default": "fail"}); err != nil {
		t.Fatal(err)
	}
}
