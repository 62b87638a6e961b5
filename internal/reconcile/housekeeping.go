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

// housekeep runs the clone's housekeeping on the first idle pass a quiet
// minute after one that fetched something: what was fetched has been
// promoted long since, and a burst of pushes never waits for it (a push
// that lands while it runs waits for the next pass, after it). A failure is logged;
// the next idle pass after a change tries again. The commits of every
// generation the cluster records are kept, reachable from a branch or
// not: a rollback may restore any of them.
func (l *Loop) housekeep(ctx context.Context) {
	h, ok := l.cfg.Source.(housekeeper)
	if !ok {
		return
	}
	if _, err := h.Housekeep(ctx, recordedCommits(l.cfg.Store.State())); err != nil && ctx.Err() == nil {
		l.log.Warn("cannot repack the policy repository's clone; trying again after the next change", "error", err)
	}
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
