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
func (s *Service) autoStart(w wantedExperiment, e *preview.Experiment, now time.Time) *preview.Experiment {
	if w.hold {
		return stopHeld(w, e, now)
	}
	return preview.AutoStart(e, s.settings(), now)
}

// stopHeld stops e's preview when w is held and e runs: a held source's
// new version (a non-writer's push past the head a writer approved) must
// not be evaluated on live traffic. The sync calls it only when the
// source moved (a new head, policy or conflict), so a preview started
// by hand through the API stays until the source moves again.
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

// StartPreviewAt is StartPreview for an experiment whose source is still
// at head: a writer's approval of a pull request's head never starts the
// experiment of a later push (ABORTED; nothing changes).
func (s *Service) StartPreviewAt(ctx context.Context, name, head string) (*preview.Operation, error) {
	return s.setPreview(ctx, name, preview.MethodStartPreview, func(e *preview.Experiment, now time.Time) (*preview.Experiment, error) {
		if e != nil && e.Source.HeadCommit != head {
			return nil, &preview.Error{Code: preview.Aborted, Msg: fmt.Sprintf(
				"experiment %q is at %.12s, not at the approved %.12s; nothing started", e.Name, e.Source.HeadCommit, head)}
		}
		return preview.StartPreview(e, now)
	})
}
