package backup

import (
	"bytes"
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
// leader can be elected. The state is encoded in memory, in this process,
// not on a serving node. nodeID names the node the directory belongs to.
func SaveOffline(w io.Writer, raftDir, nodeID string, now time.Time) (Header, error) {
	off, err := raftstore.ReadOffline(raftDir)
	if err != nil {
		return Header{}, err
	}
	if off.State.LastIndex == 0 {
		return Header{}, fmt.Errorf("%s holds no replicated state yet", raftDir)
	}
	var body bytes.Buffer
	if err := raftstore.WriteSnapshot(&body, off.State); err != nil {
		return Header{}, err
	}
	h := newHeader(off.State.LastIndex, off.Term, raftstore.Summarize(off.State), off.Servers, nodeID, now,
		int64(body.Len()))
	return h, Write(w, h, &body)
}
