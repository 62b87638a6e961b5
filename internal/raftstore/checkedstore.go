package raftstore

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

const (
	// keyLogChecksums in the stable store says that every entry of the log
	// carries a checksum (entries written before this build were given one
	// by migrateChecksums). From then on an entry without one is corrupt.
	keyLogChecksums = "reconciler.log_checksums"
	// backupSuffix names the copy of raft.db kept from before the
	// checksum migration: what a downgrade or a post-mortem needs.
	backupSuffix = ".pre-checksum"
	// migrateBatchBytes bounds the entries rewritten per bolt transaction.
	migrateBatchBytes = 8 << 20
)

// diskStore is what raftboltdb.BoltStore offers and checkedStore needs.
type diskStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

var (
	_ diskStore = (*raftboltdb.BoltStore)(nil)
	_ diskStore = (*checkedStore)(nil)
)

// checkedStore is raft's log and stable store on disk: it seals every
// entry it stores with a checksum and refuses, on read, an entry whose
// bytes changed, and it reports every failed write to a writeMonitor.
// A corrupt entry is an error from GetLog, never data: at Open that is
// ErrCorrupt (restoreLocal reads every entry); later raft stops on it.
type checkedStore struct {
	inner diskStore
	path  string // named in errors: the file an operator must deal with
	mon   *writeMonitor
}

// FirstIndex implements raft.LogStore.
func (c *checkedStore) FirstIndex() (uint64, error) { return c.inner.FirstIndex() }

// LastIndex implements raft.LogStore.
func (c *checkedStore) LastIndex() (uint64, error) { return c.inner.LastIndex() }

// GetLog implements raft.LogStore, verifying the entry's checksum.
func (c *checkedStore) GetLog(index uint64, l *raft.Log) error {
	if err := c.inner.GetLog(index, l); err != nil {
		return err
	}
	if err := unseal(l); err != nil {
		return fmt.Errorf("log entry %d in %s %w", index, c.path, err)
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (c *checkedStore) StoreLog(l *raft.Log) error {
	return c.mon.observe("store log", c.inner.StoreLog(seal(l)))
}

// StoreLogs implements raft.LogStore.
func (c *checkedStore) StoreLogs(logs []*raft.Log) error {
	sealed := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = seal(l)
	}
	return c.mon.observe("store logs", c.inner.StoreLogs(sealed))
}

// DeleteRange implements raft.LogStore.
func (c *checkedStore) DeleteRange(lo, hi uint64) error {
	return c.mon.observe("delete logs", c.inner.DeleteRange(lo, hi))
}

// Set implements raft.StableStore.
func (c *checkedStore) Set(k, v []byte) error { return c.mon.observe("set", c.inner.Set(k, v)) }

// Get implements raft.StableStore.
func (c *checkedStore) Get(k []byte) ([]byte, error) { return c.inner.Get(k) }

// SetUint64 implements raft.StableStore.
func (c *checkedStore) SetUint64(k []byte, v uint64) error {
	return c.mon.observe("set", c.inner.SetUint64(k, v))
}

// GetUint64 implements raft.StableStore.
func (c *checkedStore) GetUint64(k []byte) (uint64, error) { return c.inner.GetUint64(k) }

// Close closes the underlying store.
func (c *checkedStore) Close() error { return c.inner.Close() }

// migrateChecksums gives every entry written by an earlier build (none
// has a checksum) its checksum, once (openDisk has copied the file to
// path+backupSuffix before bolt opened it for writing). Entries are rewritten at the same index with the
// same term, type and data; term and vote stay where they are. Safe to
// run again after a crash: entries that already have a checksum are
// verified and kept, and the first backup is never overwritten.
func (c *checkedStore) migrateChecksums() (migrated int, err error) {
	if _, err := c.inner.GetUint64([]byte(keyLogChecksums)); err == nil {
		return 0, nil
	} else if !isNotFound(err) {
		return 0, fmt.Errorf("read %s: %w", keyLogChecksums, err)
	}
	first, last, err := logBounds(c.inner)
	if err != nil {
		return 0, err
	}
	if last > 0 {
		if migrated, err = c.sealRange(max(first, 1), last); err != nil {
			return migrated, err
		}
	}
	return migrated, c.SetUint64([]byte(keyLogChecksums), 1)
}

// sealRange rewrites the entries of [first, last] without a checksum.
func (c *checkedStore) sealRange(first, last uint64) (int, error) {
	var batch []*raft.Log
	size, n := 0, 0
	flush := func() error {
		err := c.StoreLogs(batch)
		n += len(batch)
		batch, size = batch[:0], 0
		return err
	}
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := c.inner.GetLog(i, l); errors.Is(err, raft.ErrLogNotFound) {
			continue // a gap below an installed snapshot
		} else if err != nil {
			return n, fmt.Errorf("read log entry %d of %s: %w", i, c.path, err)
		}
		if hasChecksum(l) { // sealed by an interrupted earlier run
			if err := unseal(l); err != nil {
				return n, fmt.Errorf("log entry %d in %s %w", i, c.path, err)
			}
			continue
		}
		batch = append(batch, l)
		if size += len(l.Data); size >= migrateBatchBytes {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if len(batch) == 0 {
		return n, nil
	}
	return n, flush()
}

// backupOnce copies src to dst and fsyncs it, unless dst exists.
func backupOnce(src, dst string) (err error) {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("back up %s: %w", src, err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("back up %s: %w", src, err)
	}
	_, err = io.Copy(out, in)
	err = errors.Join(err, out.Sync(), out.Close())
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("back up %s to %s: %w", src, dst, err)
	}
	return nil
}

func isNotFound(err error) bool {
	return errors.Is(err, raftboltdb.ErrKeyNotFound) || errors.Is(err, raft.ErrLogNotFound)
}
