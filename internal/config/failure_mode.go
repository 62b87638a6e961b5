package config

import (
	"maps"
	"slices"
)

// Failure modes of [api] failure_mode and [api.failure_modes].
const (
	FailureDeny  = "deny"
	FailureAllow = "allow"
)

// validateFailureModes checks the gateway keys of [api]: failure_mode and
// [api.failure_modes] (each "deny" or "allow", keyed by a policy name) and
// grpc_addr.
func (a *API) validateFailureModes(e *errs) {
	if !isFailureMode(a.FailureMode) {
		e.add("api.failure_mode", "%q must be %q or %q", a.FailureMode, FailureDeny, FailureAllow)
	}
	if a.GRPCAddr != "" {
		checkHostPort(e, "api.grpc_addr", a.GRPCAddr)
		if a.DecisionRole != "" {
			// The gRPC service carries no bearer token: serving it would
			// answer decisions to callers the HTTP API turns away.
			e.add("api.grpc_addr", "cannot be served with api.decision_role %q: the ext_authz gRPC service has no role check; "+
				"leave decisions open or reach the gateway forms over HTTP", a.DecisionRole)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.FailureModes)) {
		key := "api.failure_modes." + name
		if !isPolicyName(name) {
			e.add(key, "%q must be a policy name ([a-z][a-z0-9-]{0,62})", name)
		}
		if m := a.FailureModes[name]; !isFailureMode(m) {
			e.add(key, "%q must be %q or %q", m, FailureDeny, FailureAllow)
		}
	}
}

func isFailureMode(s string) bool { return s == FailureDeny || s == FailureAllow }
