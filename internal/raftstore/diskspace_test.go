package raftstore

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// logBuffer collects log lines; safe for raft's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func bufferLogger(b *logBuffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: b, Level: hclog.Info})
}

// fullDisk is an in-memory store whose writes fail while full is set,
// as bolt's do with ENOSPC.
type fullDisk struct {
	*raft.InmemStore
	full bool
}

func (d *fullDisk) StoreLogs(logs []*raft.Log) error {
	if d.full {
		return syscall.ENOSPC
	}
	return d.InmemStore.StoreLogs(logs)
}

func (d *fullDisk) SetUint64(k []byte, v uint64) error {
	if d.full {
		return syscall.ENOSPC
	}
	return d.InmemStore.SetUint64(k, v)
}

func (d *fullDisk) Close() error { return nil }

// TestWriteFailuresAreCountedAndLoggedOnce: on a full disk every write
// fails; each is counted, the first of a run is logged with the cause,
// and recovery is logged once.
func TestWriteFailuresAreCountedAndLoggedOnce(t *testing.T) {
	logs := &logBuffer{}
	disk := &fullDisk{InmemStore: raft.NewInmemStore()}
	c := &checkedStore{inner: disk, path: "raft.db", mon: &writeMonitor{logger: bufferLogger(logs), dir: t.TempDir()}}
	entry := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}
	if err := c.StoreLogs([]*raft.Log{entry}); err != nil {
		t.Fatal(err)
	}
	disk.full = true
	for i := 0; i < 5; i++ {
		if err := c.StoreLogs([]*raft.Log{entry}); err == nil {
			t.Fatal("a failed write was reported as written")
		}
	}
	if err := c.SetUint64([]byte("CurrentTerm"), 2); err == nil {
		t.Fatal("a failed write was reported as written")
	}
	if got := c.mon.failures.Load(); got != 6 {
		t.Errorf("counted %d failures, want 6", got)
	}
	if n := logs.count("raft cannot write to its data directory"); n != 1 || logs.count("no space left") != 1 {
		t.Errorf("logged the failure %d times:\n%s", n, logs.buf.String())
	}
	disk.full = false
	if err := c.StoreLogs([]*raft.Log{entry}); err != nil {
		t.Fatal(err)
	}
	if n := logs.count("raft writes to the data directory succeed again"); n != 1 {
		t.Errorf("recovery logged %d times", n)
	}
}

// TestLowFreeSpaceWarnsOnceAtOpen: a data directory below the threshold
// is reported at Open, once, with the numbers.
func TestLowFreeSpaceWarnsOnceAtOpen(t *testing.T) {
	if _, err := freeBytes(t.TempDir()); err != nil {
		t.Skip(err) // no statfs on this platform
	}
	logs := &logBuffer{}
	s, err := Open(Config{NodeID: "solo", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true,
		Timeouts: testTimeouts, Logger: bufferLogger(logs), MinFreeBytes: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	s.space.check() // a second look while still low: no second warning
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logs.count("raft data directory is low on free space"); n != 1 || logs.count("threshold_bytes=4611686018427387904") != 1 {
		t.Fatalf("warned %d times:\n%s", n, logs.buf.String())
	}
	if free, err := s.DataDirFreeBytes(); err != nil || free == 0 {
		t.Errorf("DataDirFreeBytes = %d, %v", free, err)
	}
}
