package harness

import (
	"errors"
	"testing"
	"time"
)

// A Final error ends Eventually at its first try: a node that exited
// made WaitReady wait its whole minute before it said so.
func TestEventuallyStopsAtAFinalError(t *testing.T) {
	gone := errors.New("the process exited")
	tries := 0
	err := Eventually(time.Hour, func() error {
		tries++
		return Final(gone)
	})
	if tries != 1 || !errors.Is(err, gone) {
		t.Fatalf("%d tries, error %v; want 1 try and the error", tries, err)
	}
	tries = 0
	err = Eventually(time.Hour, func() error {
		if tries++; tries < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if tries != 3 || err != nil {
		t.Fatalf("%d tries, error %v; want 3 tries and nil", tries, err)
	}
}
