package raftstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// SnapshotSummary is what a snapshot holds, in a few numbers. The FSM
// writes it before the state, so a backup can name the generation it
// holds without decoding a state that may be hundreds of megabytes.
// Builds before it ignore the field: the snapshot format is unchanged.
type SnapshotSummary struct {
	LastIndex   uint64 `json:"lastIndex"`
	Active      uint64 `json:"active"`
	Commit      string `json:"commit,omitempty"`
	Generations int    `json:"generations"`
	Experiments int    `json:"experiments"`
	Nodes       int    `json:"nodes"`
}

// Summarize returns s's summary.
func Summarize(s *State) *SnapshotSummary {
	return &SnapshotSummary{
		LastIndex: s.LastIndex, Active: s.Active, Commit: s.Generations[s.Active].Commit,
		Generations: len(s.Generations), Experiments: len(s.Experiments), Nodes: len(s.Nodes),
	}
}

// summaryPeek is how much of a snapshot's start is read for its summary:
// the format and the summary come first and take a few hundred bytes.
const summaryPeek = 4 << 10

// BackupSnapshot is a snapshot raft has just written, open for reading.
type BackupSnapshot struct {
	Meta    *raft.SnapshotMeta
	Summary SnapshotSummary
	// Body is the snapshot as the FSM wrote it (ReadSnapshot decodes
	// it), streamed from the snapshot store: never held in memory whole.
	Body io.Reader
	rc   io.Closer
}

// Close releases the snapshot file.
func (b *BackupSnapshot) Close() error { return b.rc.Close() }

// OpenBackup makes raft take a snapshot now and opens it (raft's user
// snapshot): a consistent state at Meta.Index, whatever is applied
// meanwhile. Only the leader serves backups, so that the snapshot holds
// every committed entry the cluster acknowledged; elsewhere it answers
// ErrNotLeader.
func (s *Store) OpenBackup() (*BackupSnapshot, error) {
	if !s.IsLeader() {
		return nil, ErrNotLeader
	}
	f := s.raft.Snapshot()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("take a snapshot: %w", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("open the snapshot: %w", err)
	}
	br := bufio.NewReaderSize(rc, summaryPeek)
	head, _ := br.Peek(summaryPeek) // a short snapshot gives less and an EOF
	sum, err := peekSummary(head)
	if err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("snapshot %s: %w", meta.ID, err)
	}
	return &BackupSnapshot{Meta: meta, Summary: *sum, Body: br, rc: rc}, nil
}

// peekSummary reads the summary from the start of a snapshot.
func peekSummary(head []byte) (*SnapshotSummary, error) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the snapshot is not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read the snapshot's start: %w", err)
		}
		if key == "summary" {
			var sum SnapshotSummary
			if err := dec.Decode(&sum); err != nil {
				return nil, fmt.Errorf("read the snapshot's summary: %w", err)
			}
			return &sum, nil
		}
		if key != "format" {
			break
		}
		var format int
		if err := dec.Decode(&format); err != nil {
			return nil, fmt.Errorf("read the snapshot's format: %w", err)
		}
	}
	return nil, errors.New("the snapshot has no summary (written by an older build)")
}

// SeedDataDir writes a new raft data directory dir holding one snapshot,
// body (as the FSM writes it, already verified by the caller), taken at
// index and term, with servers as the raft configuration: the state a
// node restores on start, as raft.RecoverCluster leaves it. dir must not
// exist; it is built beside it and renamed into place last, so a failure
// leaves nothing.
func SeedDataDir(dir string, index, term uint64, servers []raft.Server, body io.Reader) error {
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s exists already", dir)
	}
	tmp := dir + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := seed(tmp, index, term, servers, body); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, dir)
}

func seed(dir string, index, term uint64, servers []raft.Server, body io.Reader) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, hclog.NewNullLogger())
	if err != nil {
		return fmt.Errorf("create the snapshot store: %w", err)
	}
	// The file store encodes voters through a transport (a legacy field
	// of its metadata); an in-memory one encodes an address as itself.
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	// The configuration counts as committed at index 1, as RecoverCluster
	// places it: every node restored from the same file agrees on it.
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, raft.Configuration{Servers: servers}, 1, trans)
	if err != nil {
		return fmt.Errorf("create the snapshot: %w", err)
	}
	if _, err := io.Copy(sink, body); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("write the snapshot: %w", err)
	}
	return seedBolt(filepath.Join(dir, boltFile), term)
}

// seedBolt creates raft.db with the term raft starts from and no log: a
// raft.db must exist beside snapshots (checkBolt), and the term keeps
// the new cluster's elections above the snapshot's.
func seedBolt(path string, term uint64) error {
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout}})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	err = errors.Join(
		bolt.SetUint64([]byte("CurrentTerm"), term),
		bolt.SetUint64([]byte(keyLogChecksums), 1),
	)
	return errors.Join(err, bolt.Close())
}

// Offline is the state a stopped node holds in its raft directory.
type Offline struct {
	State *State
	// Term is the term of the last applied entry (or of the snapshot).
	Term uint64
	// Servers is the raft configuration of the newest snapshot, if any.
	Servers []raft.Server
}

// ReadOffline restores, without raft, the state a stopped node would
// serve on start: its newest snapshot and the committed log tail
// (restoreLocal). It is how a backup is made when no leader can be
// elected (lost quorum). A running node holds the directory's lock, and
// ReadOffline then fails with ErrDataDirLocked.
func ReadOffline(dir string) (*Offline, error) {
	if _, err := os.Stat(filepath.Join(dir, boltFile)); err != nil {
		return nil, fmt.Errorf("%s holds no raft data: %w", dir, err)
	}
	cfg := Config{DataDir: dir}.withDefaults()
	disk, snaps, err := openDisk(cfg)
	if err != nil {
		return nil, err
	}
	defer disk.Close()
	fsm := NewFSM(FSMConfig{Logger: cfg.Logger})
	if err := restoreLocal(fsm, snaps, disk, disk, cfg.Logger); err != nil {
		return nil, corruptErr(dir, err)
	}
	out := &Offline{State: fsm.State()}
	if list, err := snaps.List(); err == nil && len(list) > 0 {
		out.Term, out.Servers = list[0].Term, list[0].Configuration.Servers
	}
	var entry raft.Log
	if idx := out.State.LastIndex; idx > 0 && disk.GetLog(idx, &entry) == nil {
		out.Term = entry.Term
	}
	return out, nil
}
