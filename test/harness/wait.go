package harness

import (
	"errors"
	"testing"
	"time"
)

// Waits of the harness. They are generous on purpose: the tests run with
// -race on two cores shared with other test processes, where an election
// or a promotion can take many times what it takes on an idle machine.
// A wait ends as soon as its condition holds, so a generous bound costs
// nothing when things work; no test asserts on how long something took.
const (
	// ReadyTimeout bounds the wait for a node's /readyz.
	ReadyTimeout = 60 * time.Second
	// LeaderTimeout bounds the wait for the nodes to agree on a leader.
	LeaderTimeout = 60 * time.Second
	// PromoteTimeout bounds the wait for a tree to be served everywhere.
	PromoteTimeout = 60 * time.Second
)

// pollEvery is how often Eventually tries again.
const pollEvery = 20 * time.Millisecond

// Eventually calls f every 20 ms until it returns nil or timeout passed,
// and returns f's last error. An error made with Final ends the wait at
// once: what f waits for can no longer happen.
func Eventually(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		var final finalError
		if err == nil || time.Now().After(deadline) || errors.As(err, &final) {
			return err
		}
		time.Sleep(pollEvery)
	}
}

// Final marks err as one that waiting longer cannot change (a node that
// exited will not become ready), for Eventually.
func Final(err error) error { return finalError{err} }

type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }

// WaitFor is Eventually that fails the test, saying what it waited for,
// for how long, and what cond said last.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Eventually(timeout, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}
