package reconcile

import (
	"context"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// housekeepQuiet is how long after the last pass that was not idle the
// clone's housekeeping may run: a run on a large list's history holds the
// clone for seconds, and a push in a burst of them would wait for it
// (measured in TestBenchListPush: one push in twelve 4 s late).
const housekeepQuiet = time.Minute

// housekeeper is a Source whose clone needs housekeeping
// (gitsource.Source.Housekeep); the tests' fakes have none.
type housekeeper interface {
	Housekeep(ctx context.Context, keep map[uint64]string) (gitsource.Housekeeping, error)
}

// housekeep starts the clone's housekeeping beside the passes, on the
// first idle pass a quiet minute after one that fetched something: what
// was fetched has been promoted long since, and a burst of pushes never
// meets it. It runs beside the passes, so a push that lands meanwhile is
// promoted without waiting for it (its pack is written without the
// clone's locks: gitsource.Source.Housekeep). It reports false when a run
// is still going, so that the next idle pass starts another. The commits
// of every generation the cluster records are kept, reachable from a
// branch or not: a rollback may restore any of them. A failure is logged;
// the next idle pass after a change tries again.
func (l *Loop) housekeep(ctx context.Context, t *term) bool {
	h, ok := l.cfg.Source.(housekeeper)
	if !ok {
		return true
	}
	if !l.housekeeping.CompareAndSwap(false, true) {
		return false
	}
	keep := recordedCommits(l.cfg.Store.State())
	t.background.Add(1)
	go func() {
		defer t.background.Done()
		defer l.housekeeping.Store(false)
		if _, err := h.Housekeep(ctx, keep); err != nil && ctx.Err() == nil {
			l.log.Warn("cannot repack the policy repository's clone; trying again after the next change", "error", err)
		}
	}()
	return true
}

// recordedCommits are the git commits of the generations st records (at
// most raftstore.HistoryLimit), by number.
func recordedCommits(st *raftstore.State) map[uint64]string {
	keep := make(map[uint64]string, len(st.Generations))
	for n, g := range st.Generations {
		if g.Commit != "" && !IsDirCommit(g.Commit) {
			keep[n] = g.Commit
		}
	}
	return keep
}
