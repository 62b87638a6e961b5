// Package testlog gives tests a go-hclog logger that writes through t.Log,
// so a test's log lines appear only when it fails (or with -v) and next to
// the test that produced them.
package testlog

import (
	"bytes"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// New returns a trace-level logger named after the test that writes through
// t.Log. Lines written after the test ends (by goroutines still shutting
// down) are dropped, since t.Log then panics.
func New(t testing.TB) hclog.Logger {
	w := &writer{t: t}
	t.Cleanup(w.close)
	return hclog.New(&hclog.LoggerOptions{
		Name:   t.Name(),
		Level:  hclog.Trace,
		Output: w,
		Color:  hclog.ColorOff,
	})
}

type writer struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *writer) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// Buffer is a bytes.Buffer that a logger (or any concurrent writers) and
// the test reading it can share.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
