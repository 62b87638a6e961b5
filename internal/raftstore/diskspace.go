package raftstore

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// errFreeSpaceUnsupported: this platform has no statfs we read.
var errFreeSpaceUnsupported = errors.New("free space is not available on this platform")

// writeMonitor counts raft's failed writes to its data directory and
// logs the first of each run of failures (a full disk fails every write,
// many per second; one line says it, the counter says how often).
type writeMonitor struct {
	logger   hclog.Logger
	dir      string
	failures atomic.Uint64
	failing  atomic.Bool
}

// observe records the outcome of one write and returns err unchanged.
func (m *writeMonitor) observe(op string, err error) error {
	if err == nil {
		if m.failing.CompareAndSwap(true, false) {
			m.logger.Info("raft writes to the data directory succeed again", "dir", m.dir)
		}
		return nil
	}
	m.failures.Add(1)
	if m.failing.CompareAndSwap(false, true) {
		free, ferr := freeBytes(m.dir)
		m.logger.Error("raft cannot write to its data directory: this node cannot append, commit or "+
			"vote until writes succeed again (a leader steps down); further failures are only counted "+
			"(reconciler_raft_write_failures_total)", "op", op, "dir", m.dir, "free_bytes", free,
			"free_bytes_error", ferr, "error", err)
	}
	return err
}

// spaceWatch warns once when the data directory's file system has less
// than min bytes free, and once more when it has recovered. Raft needs
// room for every entry it appends and for whole snapshots; what else
// shares the disk (the preview log, git) is the first to fill it.
type spaceWatch struct {
	logger hclog.Logger
	dir    string
	min    uint64
	low    bool
	mu     sync.Mutex
	stop   chan struct{}
	done   chan struct{}
}

func startSpaceWatch(logger hclog.Logger, dir string, min uint64, every time.Duration) *spaceWatch {
	w := &spaceWatch{logger: logger, dir: dir, min: min, stop: make(chan struct{}), done: make(chan struct{})}
	w.check()
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				w.check()
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *spaceWatch) check() {
	free, err := freeBytes(w.dir)
	if err != nil {
		return // unsupported platform or a vanished directory: raft's writes report the rest
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case free < w.min && !w.low:
		w.low = true
		w.logger.Warn("raft data directory is low on free space: raft fails to append (and a leader "+
			"steps down) when it is full; free space or move what else writes to this disk",
			"dir", w.dir, "free_bytes", free, "threshold_bytes", w.min)
	case free >= w.min && w.low:
		w.low = false
		w.logger.Info("raft data directory has free space again", "dir", w.dir, "free_bytes", free,
			"threshold_bytes", w.min)
	}
}

func (w *spaceWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}
