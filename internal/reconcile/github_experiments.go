package reconcile

import (
	"context"

	"github.com/policyrollout/reconciler/internal/preview"
)

// syncPullExperiments keeps the AIP experiments "pr-N" (one per changed
// policy that loads and compiles) in step with the pull request records
// syncPulls wrote, as syncExperiments (experiments_sync.go) does for
// branches: created (and auto-started), updated when the head moves,
// deleted when the pull request closes or no longer changes the policy.
func (l *Loop) syncPullExperiments(ctx context.Context) error {
	want, err := l.wantedPullExperiments()
	if err != nil {
		return err
	}
	l.expMu.Lock()
	defer l.expMu.Unlock()
	return l.syncSourceExperiments(ctx, preview.SourcePullRequest, want)
}

// wantedPullExperiments computes, by experiment name, what each recorded
// pull request wants.
func (l *Loop) wantedPullExperiments() (map[string]wantedExperiment, error) {
	st := l.cfg.Store.State()
	var liveTree map[string][]byte
	if g, ok := servedGeneration(st); ok {
		liveTree = g.Files
	}
	want := map[string]wantedExperiment{}
	for n, rec := range ReadPullRecords(st) {
		if len(rec.ChangedPolicies) == 0 {
			continue
		}
		src := preview.Source{Kind: preview.SourcePullRequest, Number: n, HeadCommit: rec.HeadCommit, URL: rec.URL}
		if err := l.wantSource(want, src, rec.MainCommit, rec.ChangedPolicies, liveTree); err != nil {
			return nil, err
		}
		holdSuspended(want, rec)
	}
	return want, nil
}
