package backup

import (
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
	m, s := snap.Meta, snap.Summary
	h := Header{
		Format: FileFormat, Index: m.Index, Term: m.Term,
		ActiveGeneration: s.Active, Commit: s.Commit,
		Generations: s.Generations, Experiments: s.Experiments, Nodes: s.Nodes,
		NodeID: nodeID, Time: now.UTC(), Size: m.Size,
	}
	for _, srv := range m.Configuration.Servers {
		h.Servers = append(h.Servers, Server{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return h
}
