package preview_test

import (
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
)

func TestRecorderBoundsCountAndBytes(t *testing.T) {
	r := preview.NewRecorder(3, 1<<20)
	for i := range 5 {
		r.Add("web", &engine.Request{Path: strings.Repeat("a", i+1)})
	}
	r.Add("shop", &engine.Request{Path: "/s"})
	got := r.Requests("web")
	if len(got) != 2 || got[0].Path != "aaaa" || got[1].Path != "aaaaa" {
		t.Fatalf("web requests = %v", got)
	}
	if n, _ := r.Usage(); n != 3 {
		t.Fatalf("count = %d", n)
	}
	small := preview.NewRecorder(1000, 4000)
	for range 100 {
		small.Add("web", &engine.Request{Path: strings.Repeat("p", 500)})
	}
	if n, b := small.Usage(); b > 4000 || n == 0 || n > 5 {
		t.Fatalf("byte bound: %d requests, %d bytes", n, b)
	}
	small.Add("web", &engine.Request{Path: strings.Repeat("p", 8000)})
	if got := small.Requests("web"); got[len(got)-1].Path == strings.Repeat("p", 8000) {
		t.Fatal("a request over the byte bound was recorded")
	}
}

func TestReplayReturnsCount(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	h.offer("web", craftedTraffic(50)...)
	ce, err := h.comp.Compile(start(t, create(t, nil, "x", tightWeb()), t0), h.live["web"])
	if err != nil {
		t.Fatal(err)
	}
	if n := h.sh.Replay(ce); n != 50 {
		t.Fatalf("replayed %d", n)
	}
}
