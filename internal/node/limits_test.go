package node

import (
	"testing"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
)

// TestDecisionLimitDefaultsAgree: the defaults docs/configuration.md lists
// for [api] max_request_headers and max_decisions_in_flight are those the
// API applies when a Config leaves them zero.
func TestDecisionLimitDefaultsAgree(t *testing.T) {
	if config.DefaultMaxRequestHeaders != engine.DefaultMaxHeaders {
		t.Errorf("config %d headers, engine %d", config.DefaultMaxRequestHeaders, engine.DefaultMaxHeaders)
	}
	if config.DefaultMaxDecisionsInFlight != api.DefaultMaxDecisionsInFlight {
		t.Errorf("config %d in flight, api %d", config.DefaultMaxDecisionsInFlight, api.DefaultMaxDecisionsInFlight)
	}
	if config.DefaultMaxDecisionBodiesPerSource != api.DefaultMaxDecisionBodiesPerSource {
		t.Errorf("config %d bodies per source, api %d", config.DefaultMaxDecisionBodiesPerSource, api.DefaultMaxDecisionBodiesPerSource)
	}
	d := config.Default().API
	if d.MaxRequestHeaders != config.DefaultMaxRequestHeaders || d.MaxDecisionsInFlight != config.DefaultMaxDecisionsInFlight {
		t.Errorf("config.Default() [api] = %d headers, %d in flight", d.MaxRequestHeaders, d.MaxDecisionsInFlight)
	}
	if d.MaxDecisionBodiesPerSource != config.DefaultMaxDecisionBodiesPerSource {
		t.Errorf("config.Default() [api] = %d bodies per source", d.MaxDecisionBodiesPerSource)
	}
}
