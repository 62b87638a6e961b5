package raftstore

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// t0 is the base of every proposer time in tests.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// testLogger sends logs to t.Log until the test ends (raft goroutines may
// log after that, which t.Log does not allow). RAFTSTORE_LOG=trace shows
// everything.
func testLogger(t testing.TB, name string) hclog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	level := hclog.Warn
	if l := os.Getenv("RAFTSTORE_LOG"); l != "" {
		level = hclog.LevelFromString(l)
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: w, Level: level})
}

type testWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

func mustCmd(t testing.TB, p Payload) Command {
	t.Helper()
	c, err := NewCommand(p)
	if err != nil {
		t.Fatalf("NewCommand(%T): %v", p, err)
	}
	return c
}

// logEntry wraps a command in the raft.Log raft would hand the FSM.
func logEntry(t testing.TB, index uint64, c Command) *raft.Log {
	t.Helper()
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func stage(n uint64, sec int) *StageGeneration {
	return &StageGeneration{
		Generation: n,
		Commit:     "c0ffee" + string(rune('a'+n%26)),
		Files:      map[string][]byte{"policies/web.yaml": []byte("rules: []"), "root.toml": {byte(n)}},
		Etags:      map[string]string{"web": "etag-" + string(rune('a'+n%26))},
		CreateTime: at(sec),
	}
}

// fsmHarness feeds raw log entries with growing indexes.
type fsmHarness struct {
	t     testing.TB
	fsm   *FSM
	index uint64
}

func newHarness(t testing.TB, ignoreUnknown bool) *fsmHarness {
	return &fsmHarness{t: t, fsm: NewFSM(FSMConfig{IgnoreUnknown: ignoreUnknown, Logger: testLogger(t, "fsm")})}
}

func (h *fsmHarness) applyCmd(c Command) error {
	h.index++
	res := h.fsm.Apply(logEntry(h.t, h.index, c))
	if res == nil {
		return nil
	}
	return res.(error)
}

func (h *fsmHarness) apply(p Payload) error { return h.applyCmd(mustCmd(h.t, p)) }

func (h *fsmHarness) mustApply(p Payload) {
	h.t.Helper()
	if err := h.apply(p); err != nil {
		h.t.Fatalf("apply %T: %v", p, err)
	}
}

// sameExceptIndex reports whether two states are equal apart from
// LastIndex, which every command advances.
func sameExceptIndex(a, b *State) bool {
	x, y := *a, *b
	x.LastIndex, y.LastIndex = 0, 0
	return reflect.DeepEqual(x, y)
}

func jsonOf(t testing.TB, s *State) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := waitUntil(ctx, 5*time.Millisecond, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var _ io.Writer = (*testWriter)(nil)
