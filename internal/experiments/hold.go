package experiments

import (
	"context"
	"fmt"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
)

// holdSource marks the wanted experiments of src held: they do not start
// by themselves (a pull request whose preview is SUSPENDED).
func holdSource(want map[string]wantedExperiment, src preview.Source) {
	for name, w := range want {
		if w.source.Kind == src.Kind && w.source.Number == src.Number && w.source.Branch == src.Branch {
			w.hold = true
			want[name] = w
		}
	}
}

// autoStart starts e as preview.AutoStart does, unless w is held: then a
// running preview stops (stopHeld).
func (ss *sourceSync) autoStart(w wantedExperiment, e *preview.Experiment, now time.Time) *preview.Experiment {
	if w.hold {
		return stopHeld(w, e, now)
	}
	return preview.AutoStart(e, ss.cfg.settings(), now)
}

// stopHeld stops e's preview when w is held and e runs: a held source's
// new version (a non-writer's push past the head a writer approved) must
// not be evaluated on live traffic. The sync calls it when the source
// moved (a new head, policy or conflict), and for an unapproved pull
// request's experiment always.
func stopHeld(w wantedExperiment, e *preview.Experiment, now time.Time) *preview.Experiment {
	if !w.hold || !e.IsActive() {
		return e
	}
	c, err := preview.StopPreview(e, now)
	if err != nil {
		return e
	}
	return c
}

// unapproved reports whether src is a pull request from a user without
// write permission whose head no writer approved (PullRequests), as the
// replicated state has it now. Called with mu held, so that it sees every
// approval recorded before the caller took the lock.
func (ss *sourceSync) unapproved(src preview.Source) bool {
	return src.Kind == preview.SourcePullRequest && ss.cfg.Pulls != nil && ss.cfg.Pulls.PullUnapproved(src.Number, src.HeadCommit)
}

// markUnapproved holds, in want, the experiments of the pull requests
// whose head no writer approved. Called with mu held.
func (ss *sourceSync) markUnapproved(want map[string]wantedExperiment) {
	for name, w := range want {
		if ss.unapproved(w.source) {
			w.hold, w.unapproved = true, true
			want[name] = w
		}
	}
}

// startPreview is the start of a preview (the API's :startPreview, the
// comment commands): an unapproved pull request's experiment is
// FAILED_PRECONDITION, and with head set, one whose source moved past
// head is ABORTED (a writer's approval of one head never starts the
// experiment of a later push). Nothing changes then.
func (s *Service) startPreview(head string) func(*preview.Experiment, time.Time) (*preview.Experiment, error) {
	return func(e *preview.Experiment, now time.Time) (*preview.Experiment, error) {
		switch {
		case e == nil:
		case head != "" && e.Source.HeadCommit != head:
			return nil, &preview.Error{Code: preview.Aborted, Msg: fmt.Sprintf(
				"experiment %q is at %.12s, not at the approved %.12s; nothing started", e.Name, e.Source.HeadCommit, head)}
		case s.sources.unapproved(e.Source):
			return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
				"pull request #%d is from a user without write permission and no writer approved its head %.12s: a writer comments `/reconciler preview start` on it",
				e.Source.Number, e.Source.HeadCommit)}
		}
		return preview.StartPreview(e, now)
	}
}

// StartPreviewAt is StartPreview for an experiment whose source is still
// at head: a writer's approval of a pull request's head.
func (s *Service) StartPreviewAt(ctx context.Context, name, head string) (*preview.Operation, error) {
	return s.setPreview(ctx, name, preview.MethodStartPreview, s.startPreview(head))
}
