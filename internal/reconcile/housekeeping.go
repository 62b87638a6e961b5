package reconcile

import (
	"context"

	"github.com/policyrollout/reconciler/internal/gitsource"
)

// housekeeper is a Source whose clone needs housekeeping
// (gitsource.Source.Housekeep); the tests' fakes have none.
type housekeeper interface {
	Housekeep(ctx context.Context) (gitsource.Housekeeping, error)
}

// housekeep runs the clone's housekeeping on the first idle pass after
// one that fetched something: what was fetched has been promoted long
// since, and a burst of pushes never waits for it (a push that lands
// while it runs waits for the next pass, after it). A failure is logged;
// the next idle pass after a change tries again.
func (l *Loop) housekeep(ctx context.Context) {
	h, ok := l.cfg.Source.(housekeeper)
	if !ok {
		return
	}
	if _, err := h.Housekeep(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("cannot repack the policy repository's clone; trying again after the next change", "error", err)
	}
}
