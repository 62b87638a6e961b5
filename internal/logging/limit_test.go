package logging

import (
	"testing"
	"time"
)

func TestLimiterCountsWhatItHoldsBack(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(2, time.Second)
	l.now = func() time.Time { return now }
	for i, want := range []bool{true, true, false, false, false} {
		if ok, _ := l.Allow(); ok != want {
			t.Fatalf("line %d: allowed %v, want %v", i, ok, want)
		}
	}
	now = now.Add(time.Second)
	if ok, n := l.Allow(); !ok || n != 3 {
		t.Fatalf("after the interval: allowed %v with %d held back, want true with 3", ok, n)
	}
	if ok, n := l.Allow(); !ok || n != 0 {
		t.Fatalf("second line: %v %d", ok, n)
	}
}
