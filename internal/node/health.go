package node

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// Health check limits.
const (
	// minFreeDisk is the free space data_dir needs: raft snapshots, the log
	// and the preview log must fit.
	minFreeDisk = 256 << 20
	// catchUpWait is how long a node waits to apply the leader's index (and
	// its loader to switch) before it reports itself behind.
	catchUpWait = time.Second
	// saturatedPercent of the preview queue in use counts as saturated:
	// mirrored requests are being dropped or about to be.
	saturatedPercent = 90
)

// The parts of the node the health check reads.
type (
	checkedStore interface {
		State() *raftstore.State
		IsLeader() bool
	}
	sourceReader interface {
		SourceStatus() reconcile.SourceStatus
	}
	previewQueue interface {
		Status() preview.Status
	}
)

// selfChecker is this node's health check, from what it needs of the
// node's parts.
type selfChecker struct {
	self      string
	dataDir   string
	queueSize int // [preview] queue_size
	store     checkedStore
	loop      sourceReader // the leader loop's last read of the source
	gens      *generations
	state     *nodeState
	preview   previewQueue
	healthy   *atomic.Pointer[string] // where the last result goes, for the PDP_STATUS
}

// check is this node's health check (cluster.SelfChecker): raft caught
// up with the leader's index, the active generation loaded with the
// active etags, disk space in data_dir, the preview queue, and on the
// leader the last read of the git source.
func (h *selfChecker) check(ctx context.Context, leaderIndex uint64) cluster.HealthReport {
	reasons := h.waitCaughtUp(ctx, leaderIndex)
	reasons = append(reasons, h.diskReasons()...)
	reasons = append(reasons, h.previewReasons()...)
	if h.store.IsLeader() {
		if s := h.loop.SourceStatus(); s.Error != "" {
			reasons = append(reasons, "git source: "+s.Error)
		}
	}
	r := cluster.HealthReport{ID: h.self, Healthy: cluster.Healthy, Reasons: reasons}
	if len(reasons) > 0 {
		r.Healthy = cluster.NotHealthy
	} else {
		r.Reasons = []string{}
	}
	h.healthy.Store(&r.Healthy)
	return r
}

// waitCaughtUp gives raft and the loader up to catchUpWait to reach the
// leader's index and the active generation; it returns what is still
// behind.
func (h *selfChecker) waitCaughtUp(ctx context.Context, leaderIndex uint64) []string {
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	for {
		reasons := h.syncReasons(leaderIndex)
		if len(reasons) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return reasons
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// syncReasons says how this node is behind the leader's index or the
// active generation.
func (h *selfChecker) syncReasons(leaderIndex uint64) []string {
	st := h.store.State()
	var out []string
	if st.LastIndex < leaderIndex {
		out = append(out, fmt.Sprintf("raft is behind: applied index %d, the leader's is %d", st.LastIndex, leaderIndex))
	}
	g, ok := st.ActiveGeneration()
	if !ok {
		return out
	}
	cur := h.gens.Current()
	switch {
	case cur == nil || cur.Bundle == nil:
		out = append(out, fmt.Sprintf("no generation loaded; generation %d is active", g.Number))
	case cur.Generation != g.Number && h.state.NodeState() != raftstore.NodeSafe && len(g.NodeErrors[h.self]) > 0:
		out = append(out, fmt.Sprintf("serves generation %d; generation %d is active and does not load here: %s",
			cur.Generation, g.Number, g.NodeErrors[h.self][0]))
	case cur.Generation != g.Number && h.state.NodeState() != raftstore.NodeSafe:
		out = append(out, fmt.Sprintf("serves generation %d; generation %d is active", cur.Generation, g.Number))
	case cur.Generation == g.Number && !maps.Equal(cur.Bundle.Etags(), servedEtags(g.Etags, cur.Bundle)):
		out = append(out, fmt.Sprintf("generation %d is loaded with etags other than the active ones", g.Number))
	}
	return out
}

// diskReasons checks the free space of data_dir.
func (h *selfChecker) diskReasons() []string {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(h.dataDir, &fs); err != nil {
		return []string{fmt.Sprintf("data_dir: %v", err)}
	}
	free := fs.Bavail * uint64(fs.Bsize)
	if free < minFreeDisk {
		return []string{fmt.Sprintf("data_dir has %d MiB free, below %d MiB", free>>20, minFreeDisk>>20)}
	}
	return nil
}

// previewReasons checks that the preview queue is not saturated.
func (h *selfChecker) previewReasons() []string {
	size := h.queueSize
	if size <= 0 {
		size = preview.DefaultQueueSize
	}
	if q := h.preview.Status().Queued; q*100 >= size*saturatedPercent {
		return []string{fmt.Sprintf("preview queue saturated: %d of %d", q, size)}
	}
	return nil
}
