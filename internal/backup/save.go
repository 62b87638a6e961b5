package backup

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Source takes a consistent snapshot of the replicated state
// (raftstore.Store on the leader).
type Source interface {
	OpenBackup() (*raftstore.BackupSnapshot, error)
}

var _ Source = (*raftstore.Store)(nil)

// Save takes a snapshot from src and streams it to w as a snapshot file
// taken by nodeID at now. The snapshot is copied from raft's snapshot
// store in small pieces, so its size costs no memory here.
func Save(w io.Writer, src Source, nodeID string, now time.Time) (Header, error) {
	snap, err := src.OpenBackup()
	if err != nil {
		return Header{}, err
	}
	defer snap.Close()
	h := headerOf(snap, nodeID, now)
	if err := Write(w, h, snap.Body); err != nil {
		return h, fmt.Errorf("stream snapshot %s: %w", snap.Meta.ID, err)
	}
	return h, nil
}

func headerOf(snap *raftstore.BackupSnapshot, nodeID string, now time.Time) Header {
	m := snap.Meta
	return newHeader(m.Index, m.Term, &snap.Summary, m.Configuration.Servers, nodeID, now, m.Size)
}

func newHeader(index, term uint64, s *raftstore.SnapshotSummary, servers []raft.Server, nodeID string,
	now time.Time, size int64) Header {
	h := Header{
		Format: FileFormat, Index: index, Term: term,
		ActiveGeneration: s.Active, Commit: s.Commit,
		Generations: s.Generations, Experiments: s.Experiments, Nodes: s.Nodes,
		NodeID: nodeID, Time: now.UTC(), Size: size,
	}
	for _, srv := range servers {
		h.Servers = append(h.Servers, Server{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return h
}

// SaveOffline writes a snapshot file of the state a stopped node holds in
// its raft directory (raftstore.ReadOffline): the backup to take when no
// leader can be elected. The state is decoded in memory, in this process,
// not on a serving node; its snapshot is streamed into w (saveStream).
// nodeID names the node the directory belongs to.
func SaveOffline(w io.Writer, raftDir, nodeID string, now time.Time) (Header, error) {
	off, err := raftstore.ReadOffline(raftDir)
	if err != nil {
		return Header{}, err
	}
	if off.State.LastIndex == 0 {
		return Header{}, fmt.Errorf("%s holds no replicated state yet", raftDir)
	}
	var size byteCounter
	if err := raftstore.WriteSnapshot(&size, off.State); err != nil {
		return Header{}, err
	}
	h := newHeader(off.State.LastIndex, off.Term, raftstore.Summarize(off.State), off.Servers, nodeID, now,
		int64(size))
	return h, saveStream(w, h, off.State)
}

// saveStream writes the snapshot file of st, whose snapshot is h.Size
// bytes. The header holds the size, so the snapshot is written twice:
// counted (SaveOffline), then piped into the file. WriteSnapshot streams
// and is deterministic (maps in key order), so neither pass holds the
// encoded state and both write the same bytes; Write checks the size.
func saveStream(w io.Writer, h Header, st *raftstore.State) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(raftstore.WriteSnapshot(pw, st))
	}()
	err := Write(w, h, pr)
	// Unblocks the writer when Write stopped reading early.
	_ = pr.CloseWithError(errSaveStopped)
	<-done
	return err
}

var errSaveStopped = errors.New("the snapshot file stopped being written")

// byteCounter counts what is written to it.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}
