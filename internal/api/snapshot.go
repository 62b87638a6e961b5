package api

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/policyrollout/reconciler/internal/backup"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
)

// snapshotPath is GET /v1/snapshot: a backup of the replicated state
// (`reconciler snapshot save`), admin only.
const snapshotPath = "/v1/snapshot"

// Snapshotter writes a snapshot file of the replicated state to w
// (backup.Save on the node's raft store). On a node that does not lead it
// answers raftstore.ErrNotLeader before writing anything.
type Snapshotter interface {
	SaveSnapshot(w io.Writer) (backup.Header, error)
}

// snapshotWriteTime bounds the transfer of one snapshot.
const snapshotWriteTime = 30 * time.Minute

// snapshotGate lets one snapshot be taken at a time on a node: each one
// makes raft write the whole state to disk, so a caller repeating the
// request costs one snapshot's disk and CPU at once, never more.
type snapshotGate struct{ mu sync.Mutex }

// getSnapshot streams a snapshot file. Only the leader takes one, so that
// it holds everything the cluster acknowledged; a follower redirects the
// caller (307) to the leader's API address, which the CLI follows once
// with the same credential. The body streams from raft's snapshot file in
// small writes: memory does not grow with the state.
func (s *clusterAPI) getSnapshot(w http.ResponseWriter, r *http.Request) {
	if s.cluster == nil || s.snapshots == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	if !s.allow(w, r, http.MethodGet) {
		return
	}
	if r.Method == http.MethodHead { // says the endpoint is there; takes no snapshot
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	if leader := s.cluster.Leader(); leader != s.cluster.NodeID() {
		s.redirectSnapshot(w, r, leader)
		return
	}
	if !s.snapshotGate.mu.TryLock() {
		s.fail(w, r, errorf(errs.ResourceExhausted, "a snapshot is being taken on this node; retry when it is done"))
		return
	}
	defer s.snapshotGate.mu.Unlock()
	// The server's write timeout fits answers, not a state of hundreds of
	// megabytes on a slow link; an admin's transfer gets longer.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(snapshotWriteTime))
	sw := &snapshotWriter{w: w}
	h, err := s.snapshots.SaveSnapshot(sw)
	switch {
	case err != nil && sw.n == 0:
		s.fail(w, r, err)
	case err != nil:
		// The status is sent: cut the stream, so the client sees a
		// broken transfer (and the file would fail its checksum anyway).
		s.log.Error("snapshot stream failed", "written", sw.n, "error", err)
		panic(http.ErrAbortHandler)
	default:
		s.audit.Info("snapshot saved", "index", h.Index, "generation", h.ActiveGeneration, "bytes", sw.n,
			"remote", r.RemoteAddr)
	}
}

// redirectSnapshot points the caller to the leader's API.
func (s *clusterAPI) redirectSnapshot(w http.ResponseWriter, r *http.Request, leader string) {
	addr := s.cluster.State().Nodes[leader].HTTPAddr
	if leader == "" || addr == "" {
		s.fail(w, r, cluster.ErrNoLeader)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Location", scheme+"://"+addr+snapshotPath)
	writeError(w, http.StatusTemporaryRedirect, errs.Unavailable.String(),
		fmt.Sprintf("node %s leads and takes snapshots: ask it at %s", leader, addr), "")
}

// snapshotWriter sets the headers on the first write and counts bytes.
type snapshotWriter struct {
	w http.ResponseWriter
	n int64
}

func (sw *snapshotWriter) Write(p []byte) (int, error) {
	if sw.n == 0 {
		sw.w.Header().Set("Content-Type", "application/octet-stream")
		sw.w.Header().Set("Content-Disposition", `attachment; filename="reconciler.snapshot"`)
		sw.w.WriteHeader(http.StatusOK)
	}
	n, err := sw.w.Write(p)
	sw.n += int64(n)
	return n, err
}
