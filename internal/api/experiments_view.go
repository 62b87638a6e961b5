package api

import (
	"net/http"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Experiment reads are BASIC by default: stats without their sample
// requests. ?view=FULL adds the samples (AIP-157's view enum); they are
// copies of users' requests (redacted by allow-list), so authorization
// middleware should require the reader role for FULL (see withSamples).
const (
	viewBasic = "BASIC"
	viewFull  = "FULL"
)

// withSamples reports whether the read asked for samples (?view=FULL).
func withSamples(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("view"); v {
	case "", viewBasic:
		return false, nil
	case viewFull:
		return true, nil
	default:
		return false, errorf(errs.InvalidArgument, "view %q must be BASIC or FULL", v)
	}
}

// experimentView renders e for a read, with samples only when asked.
func (s *policies) experimentView(e *preview.Experiment, stats []preview.Stats, samples bool) apiv1.Experiment {
	v := preview.ViewWith(e, stats, s.thresholds.For(e.PolicyName()))
	if !samples {
		v = v.WithoutSamples()
	}
	return apiv1.FromExperiment(v)
}
