package experiments

import (
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

// autoStart starts e as preview.AutoStart does, unless w is held.
func (s *Service) autoStart(w wantedExperiment, e *preview.Experiment, now time.Time) *preview.Experiment {
	if w.hold {
		return e
	}
	return preview.AutoStart(e, s.settings(), now)
}
