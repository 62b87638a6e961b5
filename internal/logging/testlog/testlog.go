// Package testlog gives tests a go-hclog logger that writes through t.Log,
// so a test's log lines appear only when it fails (or with -v) and next to
// the test that produced them.
package testlog

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// New returns a trace-level logger named after the test that writes through
// t.Log. Lines written after the test ends (by goroutines still shutting
// down) are dropped, since t.Log then panics.
func New(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   t.Name(),
		Level:  hclog.Trace,
		Output: Writer(t, ""),
		Color:  hclog.ColorOff,
	})
}

// Writer returns a writer that logs each write through t.Log, after
// prefix, until the test ends; later writes are dropped.
func Writer(t testing.TB, prefix string) io.Writer {
	w := &writer{t: t, prefix: prefix}
	t.Cleanup(w.close)
	return w
}

type writer struct {
	mu     sync.Mutex
	t      testing.TB
	prefix string
	done   bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(w.prefix + string(bytes.TrimRight(p, "\n")))
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
