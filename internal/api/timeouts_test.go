package api

import (
	"testing"
	"time"
)

func TestMaxHandlerTime(t *testing.T) {
	for name, d := range map[string]time.Duration{"experimentWriteTimeout": experimentWriteTimeout, "leaderWait": leaderWait} {
		if d > MaxHandlerTime {
			t.Errorf("%s (%v) is longer than MaxHandlerTime (%v)", name, d, MaxHandlerTime)
		}
	}
}
