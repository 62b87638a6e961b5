package reconcile

import (
	"context"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// syncPullExperiments keeps the AIP experiments "pr-N" (one per changed
// policy that loads and compiles) in step with the pull request records
// syncPulls wrote, the same way syncExperiments (experiments.go) does for
// branches: created (and auto-started), updated when the head moves,
// deleted when the pull request closes or no longer changes the policy.
func (l *Loop) syncPullExperiments(ctx context.Context) error {
	want, err := l.wantedPullExperiments()
	if err != nil {
		return err
	}
	l.expMu.Lock()
	defer l.expMu.Unlock()
	now := l.cfg.Now()
	exps := l.experiments(l.cfg.Store.State())
	byName := map[string]*preview.Experiment{}
	for _, e := range exps {
		byName[e.Name] = e
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		cur := byName[name]
		var next *preview.Experiment
		switch {
		case cur == nil:
			e, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/" + w.policy.Name, Policy: w.policy,
				Source: preview.Source{Kind: preview.SourcePullRequest, Number: w.number, HeadCommit: w.head, URL: w.url}},
				l.settings(), now)
			if err != nil {
				l.log.Warn("cannot create the pull request experiment", "experiment", name, "error", err)
				continue
			}
			next = preview.AutoStart(e, l.settings(), now)
			exps = append(exps, next)
		case cur.Source.Kind != preview.SourcePullRequest:
			continue
		case cur.Etag != w.policy.Etag():
			e, err := preview.Update(cur, preview.UpdateRequest{Policy: w.policy, HeadCommit: w.head}, now)
			if err != nil {
				l.log.Warn("cannot update the pull request experiment", "experiment", name, "error", err)
				continue
			}
			next = preview.AutoStart(e, l.settings(), now)
		case cur.Source.HeadCommit != w.head:
			c := *cur
			c.Source.HeadCommit, c.UpdateTime = w.head, now
			next = &c
		default:
			continue
		}
		if err := l.putExperiment(ctx, next); err != nil {
			return err
		}
		l.log.Info("pull request experiment recorded", "experiment", name, "etag", next.Etag, "head", w.head,
			"active", next.IsActive())
	}
	for _, e := range exps {
		if _, keep := want[e.Name]; keep || e.Source.Kind != preview.SourcePullRequest || byName[e.Name] == nil {
			continue
		}
		if err := l.deleteExperiment(ctx, e.Name); err != nil {
			return err
		}
		l.log.Info("pull request closed or back to live; experiment deleted", "experiment", e.Name)
	}
	return nil
}

// pullExperiment is what one pull request wants for one policy.
type pullExperiment struct {
	number    int
	head, url string
	policy    *policy.Policy
}

// wantedPullExperiments computes, by experiment name, what each recorded
// pull request wants.
func (l *Loop) wantedPullExperiments() (map[string]pullExperiment, error) {
	st := l.cfg.Store.State()
	var liveTree map[string][]byte
	if g, ok := servedGeneration(st); ok {
		liveTree = g.Files
	}
	want := map[string]pullExperiment{}
	for n, rec := range ReadPullRecords(st) {
		if len(rec.ChangedPolicies) == 0 {
			continue
		}
		id, err := preview.ExperimentID(preview.Source{Kind: preview.SourcePullRequest, Number: n}, "")
		if err != nil {
			continue
		}
		files, err := l.branchFiles(rec.HeadCommit)
		if err != nil {
			return nil, err
		}
		for _, pol := range rec.ChangedPolicies {
			if p := l.branchPolicy(files, liveTree, pol); p != nil {
				want[preview.ResourceName(pol, id)] = pullExperiment{number: n, head: rec.HeadCommit, url: rec.URL, policy: p}
			}
		}
	}
	return want, nil
}
