package experiments

import (
	"context"

	"github.com/policyrollout/reconciler/internal/preview"
)

// AutoStop suspends, one log entry each, the ACTIVE experiments whose
// autoStop (or the configured default) is due: after its duration since
// the preview started, or once the cluster's merged stats of its version
// count its requests. The reason stays in previewMetadata.stopReason.
// The leader's promoter calls it on every state change and check tick,
// so an experiment stops within a check interval (and a heartbeat, for
// the counts) of being due. Write failures are retried on the next call.
func (s *Service) AutoStop(ctx context.Context) {
	def := s.cfg.Preview.AutoStop
	if s.cfg.Stats == nil && def.Duration.D <= 0 {
		return
	}
	var merged []preview.Stats
	if s.cfg.Stats != nil {
		merged = s.cfg.Stats()
	}
	now := s.cfg.Now()
	for _, e := range s.List() {
		if preview.AutoStopDue(e, preview.CurrentStats(e, merged), def, now) == "" {
			continue
		}
		err := s.stopDue(ctx, e.Name, merged, def)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("cannot auto-stop an experiment; next check", "experiment", e.Name, "error", err)
		}
	}
}

// stopDue suspends experiment name if, under mu, it is still due.
func (s *Service) stopDue(ctx context.Context, name string, merged []preview.Stats, def preview.AutoStop) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	cur, err := preview.Get(s.records.experiments(s.cfg.Store.State()), name)
	if err != nil {
		return nil // deleted meanwhile
	}
	reason := preview.AutoStopDue(cur, preview.CurrentStats(cur, merged), def, now)
	if reason == "" {
		return nil
	}
	if err := s.records.putExperiment(ctx, preview.AutoStopped(cur, reason, now)); err != nil {
		return err
	}
	s.log.Info("experiment auto-stopped", "experiment", name, "reason", reason)
	return nil
}
