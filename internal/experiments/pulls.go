package experiments

import (
	"context"

	"github.com/policyrollout/reconciler/internal/preview"
)

// SyncPulls keeps the AIP experiments "pr-N" (one per changed policy
// that loads and compiles) in step with the pull requests the pass just
// recorded, as SyncBranches does for branches: created (and
// auto-started), updated when the head moves, deleted when the pull
// request closes or no longer changes the policy.
func (s *Service) SyncPulls(ctx context.Context, changes []Change, live map[string][]byte) error {
	want, err := s.sources.wanted(changes, live)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources.markUnapproved(want)
	return s.sources.syncSourceExperiments(ctx, preview.SourcePullRequest, want)
}
