package node

import (
	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/config"
)

// failureModes converts the validated [api] failure modes.
func failureModes(a config.API) api.FailureModes {
	out := api.FailureModes{Policies: make(map[string]api.FailureMode, len(a.FailureModes))}
	out.Default, _ = api.ParseFailureMode(a.FailureMode)
	for name, m := range a.FailureModes {
		out.Policies[name], _ = api.ParseFailureMode(m)
	}
	return out
}
