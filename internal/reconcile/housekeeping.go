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

// stepHousekeeping is the last step of a pass that fetched something new:
// the clone is repacked, when past its limits, once what the pass fetched
// has been promoted, so that push→Active never waits for it (a push that
// lands meanwhile waits for the next pass, after it). An idle pass stops
// earlier (nothing was fetched). A failure is logged and the pass goes
// on: the next pass that fetches tries again.
func (l *Loop) stepHousekeeping(ctx context.Context, _ *pass) (bool, error) {
	h, ok := l.cfg.Source.(housekeeper)
	if !ok {
		return false, nil
	}
	if _, err := h.Housekeep(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("cannot repack the policy repository's clone; trying again after the next change", "error", err)
	}
	return false, nil
}
