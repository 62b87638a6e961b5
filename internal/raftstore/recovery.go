package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

const (
	boltFile = "raft.db"
	// keyAppliedIndex is our key in raft's stable store (bolt "conf"
	// bucket): the index of the last command this node applied, which is
	// known to be committed. Raft itself does not persist its commit index.
	keyAppliedIndex = "reconciler.applied_index"
	// boltOpenTimeout bounds the wait for bolt's file lock; the default is
	// to wait forever when another process holds it.
	boltOpenTimeout = 2 * time.Second
)

// corruptErr says what is wrong and what the operator should do.
func corruptErr(dir string, cause error) error {
	return fmt.Errorf("%w in %s (%v): move the directory aside and "+
		"restart this node with an empty data directory and without bootstrap; the leader then "+
		"sends it a snapshot (join it again if it was removed from the cluster)", ErrCorrupt, dir, cause)
}

// openDisk opens the snapshot store and raft.db after checking that
// raft.db is whole. A damaged file must be refused before raft touches it:
// raft panics on unreadable entries and bolt writes on open. The log is
// opened through checkedStore, so every entry read is verified against its
// checksum; a raft.db of an earlier build gets its checksums here, once.
func openDisk(cfg Config) (*checkedStore, *raft.FileSnapshotStore, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data dir: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, snapshotsRetained, cfg.Logger.Named("raft"))
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot store: %w", err)
	}
	list, err := snaps.List()
	if err != nil {
		return nil, nil, corruptErr(cfg.DataDir, fmt.Errorf("list snapshots: %w", err))
	}
	path := filepath.Join(cfg.DataDir, boltFile)
	unsealed, err := checkBolt(path, len(list) > 0)
	if err != nil {
		if errors.Is(err, ErrDataDirLocked) {
			return nil, nil, fmt.Errorf("%w: %s", err, path)
		}
		return nil, nil, corruptErr(cfg.DataDir, err)
	}
	if unsealed { // before bolt writes to it, so the copy is the old build's file
		if err := backupOnce(path, path+backupSuffix); err != nil {
			return nil, nil, err
		}
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	logger := cfg.Logger.Named("raft")
	disk := &checkedStore{inner: bolt, path: path, mon: &writeMonitor{logger: logger, dir: cfg.DataDir}}
	if err := migrateDisk(disk, logger); err != nil {
		_ = disk.Close()
		return nil, nil, err
	}
	return disk, snaps, nil
}

// migrateDisk runs the checksum migration and says what it did.
func migrateDisk(disk *checkedStore, logger hclog.Logger) error {
	n, err := disk.migrateChecksums()
	switch {
	case errors.Is(err, errChecksum):
		return corruptErr(filepath.Dir(disk.path), err)
	case err != nil:
		return fmt.Errorf("add checksums to the entries of %s: %w", disk.path, err)
	case n > 0:
		logger.Info("added checksums to the log entries of an earlier build", "entries", n,
			"backup", disk.path+backupSuffix)
	}
	return nil
}

// checkBolt verifies raft.db read-only, and reports whether it holds log
// entries of a build before checksums (see migrateChecksums). An absent or
// empty file is a new node, unless snapshots exist: then the log and the
// vote record are gone, and starting anyway could make this node vote
// twice in a term.
func checkBolt(path string, haveSnapshots bool) (unsealed bool, err error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && info.Size() == 0) {
		if haveSnapshots {
			return false, errors.New("raft.db is missing or empty but snapshots exist")
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = guarded(func() (err error) {
		unsealed, err = verifyBolt(path, info.Size())
		return err
	})
	return unsealed, err
}

// verifyBolt opens the file read-only and reads every page raft uses.
// bbolt 1.3 does not notice a truncated file on open: it maps pages past
// the end and faults when they are read.
func verifyBolt(path string, size int64) (unsealed bool, err error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: boltOpenTimeout})
	if errors.Is(err, bbolt.ErrTimeout) {
		return false, ErrDataDirLocked
	}
	if err != nil {
		return false, fmt.Errorf("open raft.db: %w", err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("raft.db is %d bytes but its pages extend to %d bytes: truncated", size, tx.Size())
		}
		for _, name := range []string{"logs", "conf"} {
			b := tx.Bucket([]byte(name))
			if b == nil {
				return fmt.Errorf("raft.db has no %q bucket", name)
			}
			if err := b.ForEach(func(k, v []byte) error { return nil }); err != nil {
				return fmt.Errorf("read bucket %q: %w", name, err)
			}
		}
		logs, _ := tx.Bucket([]byte("logs")).Cursor().First()
		unsealed = logs != nil && tx.Bucket([]byte("conf")).Get([]byte(keyLogChecksums)) == nil
		return nil
	})
	return unsealed, err
}

// guarded runs fn on a goroutine where a memory fault in mmapped data is a
// recoverable panic (SIGBUS on a truncated file) rather than a crash.
func guarded(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("reading raft.db failed: %v", r)
			}
		}()
		errc <- fn()
	}()
	return <-errc
}

// restoreLocal brings the FSM to the last state this node knew committed,
// before raft starts and without a leader: it restores the newest snapshot
// and replays the log tail up to the persisted applied index. Raft would
// only restore the snapshot; the entries after it wait for a leader to
// re-establish the commit index, and a restarted node must serve its last
// active generation at once. Entries beyond the applied index might not be
// committed and are left to raft. The whole tail is read, so a damaged log
// is reported here rather than by a panic inside raft.NewRaft.
func restoreLocal(fsm *FSM, snaps raft.SnapshotStore, logs raft.LogStore, stable raft.StableStore,
	logger hclog.Logger) error {
	snapIdx, err := restoreNewestSnapshot(fsm, snaps)
	if err != nil {
		return err
	}
	applied, err := stable.GetUint64([]byte(keyAppliedIndex))
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return fmt.Errorf("read applied index: %w", err)
	}
	first, last, err := logBounds(logs)
	if err != nil {
		return err
	}
	if last > snapIdx && first > snapIdx+1 {
		return fmt.Errorf("log starts at %d but the snapshot ends at %d", first, snapIdx)
	}
	// Every entry is read, so a corrupt one is found now rather than when
	// raft sends it to a follower. Only entries after the snapshot must
	// exist: below it, a node that installed a leader's snapshot may keep
	// stale entries with a gap before the new ones, until the next
	// compaction. Raft reads the same range at start.
	for i := max(first, 1); i <= last; i++ {
		var entry raft.Log
		err := logs.GetLog(i, &entry)
		if i <= snapIdx && errors.Is(err, raft.ErrLogNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read log entry %d of %d..%d: %w", i, first, last, err)
		}
		if i > snapIdx && i <= applied {
			fsm.Apply(&entry) // a rejection is part of the replicated history
		}
	}
	if got := fsm.State().LastIndex; got < applied {
		return fmt.Errorf("entries up to %d were applied but the log only reaches %d", applied, got)
	}
	logger.Info("restored local state", "snapshot_index", snapIdx, "applied_index", applied,
		"log_first", first, "log_last", last, "active_generation", fsm.State().Active)
	return nil
}

func restoreNewestSnapshot(fsm *FSM, snaps raft.SnapshotStore) (uint64, error) {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return 0, err
	}
	// Only the newest: raft (NoSnapshotRestoreOnStart) counts it as applied,
	// so falling back to an older one would leave a gap.
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return 0, fmt.Errorf("open snapshot %s: %w", list[0].ID, err)
	}
	if err := fsm.Restore(rc); err != nil {
		return 0, fmt.Errorf("restore snapshot %s: %w", meta.ID, err)
	}
	return meta.Index, nil
}

func logBounds(logs raft.LogStore) (first, last uint64, err error) {
	if first, err = logs.FirstIndex(); err != nil {
		return 0, 0, fmt.Errorf("read first log index: %w", err)
	}
	if last, err = logs.LastIndex(); err != nil {
		return 0, 0, fmt.Errorf("read last log index: %w", err)
	}
	return first, last, nil
}

// appliedPersister records the FSM's LastIndex in the stable store, which
// a restart replays up to (restoreLocal). Two paths write it:
//
//   - synchronously, from the FSM's apply (persistNow, installed with
//     FSM.setPersist), for generation lifecycle commands, before the state
//     they produce is published: nobody can act on an activation (the node
//     loader swapping generations, a client reading the API) before a
//     crash-restart is guaranteed to restore it;
//   - in the background after any other change, off the apply path: losing
//     that write in a crash only means a restart replays a little less and
//     catches up from the leader.
//
// Every index written was applied, hence committed: a safe lower bound of
// the commit index. Writes only ever raise the recorded index.
type appliedPersister struct {
	fsm    *FSM
	stable raft.StableStore
	logger hclog.Logger
	stop   chan struct{}
	done   chan struct{}

	mu   sync.Mutex // serialises writes, so the recorded index never goes down
	last uint64     // the index recorded in the stable store
}

func startPersister(fsm *FSM, stable raft.StableStore, logger hclog.Logger) *appliedPersister {
	p := &appliedPersister{
		fsm: fsm, stable: stable, logger: logger,
		last: fsm.State().LastIndex,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	ch, cancel := fsm.Subscribe()
	go p.run(ch, cancel)
	fsm.setPersist(p.persistNow)
	return p
}

func (p *appliedPersister) run(ch <-chan struct{}, cancel func()) {
	defer close(p.done)
	defer cancel()
	for {
		select {
		case <-ch:
			p.flush()
		case <-p.stop:
			return
		}
	}
}

// flush records the published state's index (background path).
func (p *appliedPersister) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Read under the lock: a concurrent persistNow of a newer index then
	// either precedes this read or sees this write as older than its own.
	p.write(p.fsm.State().LastIndex, false)
}

// persistNow records index before the FSM publishes it. It runs on raft's
// FSM goroutine (BoltStore is safe for concurrent use: every call is its
// own bolt transaction, writers are serialised by bolt and fsynced on
// commit).
func (p *appliedPersister) persistNow(index uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(index, true)
}

func (p *appliedPersister) write(idx uint64, sync bool) {
	if idx <= p.last {
		return
	}
	if err := p.stable.SetUint64([]byte(keyAppliedIndex), idx); err != nil {
		// Not fatal for the cluster: raft's own writes to the same file will
		// fail loudly. The background path retries on the next change.
		if sync {
			p.logger.Error("cannot persist applied index before publishing a generation change; "+
				"a crash now could restart this node on an older generation", "index", idx, "error", err)
		} else {
			p.logger.Warn("cannot persist applied index", "index", idx, "error", err)
		}
		return
	}
	p.last = idx
}

// recorded returns the index recorded in the stable store.
func (p *appliedPersister) recorded() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// close stops the background goroutine, then records the final index.
// Call it after raft has stopped applying.
func (p *appliedPersister) close() {
	p.stopBackground()
	p.fsm.setPersist(nil)
	p.flush()
}

// stopBackground ends the background goroutine without a final write.
func (p *appliedPersister) stopBackground() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}
