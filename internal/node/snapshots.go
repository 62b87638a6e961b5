package node

import (
	"io"
	"time"

	"github.com/policyrollout/reconciler/internal/backup"
)

// snapshots serves GET /v1/snapshot from this node's raft store
// (api.Snapshotter).
type snapshots struct{ m *Main }

func (s snapshots) SaveSnapshot(w io.Writer) (backup.Header, error) {
	return backup.Save(w, s.m.store, s.m.Config.Node.ID, time.Now())
}
