package node

import (
	"context"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/extauthz"
	"github.com/policyrollout/reconciler/internal/logging"
)

// startGRPC serves Envoy's ext_authz gRPC API on [api] grpc_addr, when it
// is set, deciding with the node's API server; it fails Run if it cannot
// listen.
func (m *Main) startGRPC(ctx context.Context) error {
	addr := m.Config.API.GRPCAddr
	if addr == "" {
		return nil
	}
	g := extauthz.New(extauthz.Config{Addr: addr, Authorizer: m.api, Logger: m.Logger.Named(logging.ExtAuthz)})
	if err := g.Start(ctx); err != nil {
		return err
	}
	m.grpc = g
	return nil
}

// stopGRPC stops the gRPC server within the shutdown timeout.
func (m *Main) stopGRPC() error {
	if m.grpc == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.ShutdownTimeout)
	defer cancel()
	return m.grpc.Stop(ctx)
}

// GRPCAddr returns the address the ext_authz gRPC service listens on, ""
// when it is off.
func (m *Main) GRPCAddr() string {
	if m.grpc == nil {
		return ""
	}
	return m.grpc.Addr()
}

// failureModes converts the validated [api] failure modes.
func failureModes(a config.API) api.FailureModes {
	out := api.FailureModes{Policies: make(map[string]api.FailureMode, len(a.FailureModes))}
	out.Default, _ = api.ParseFailureMode(a.FailureMode)
	for name, m := range a.FailureModes {
		out.Policies[name], _ = api.ParseFailureMode(m)
	}
	return out
}

// pathSlashes converts the validated [api] path_escaped_slashes.
func pathSlashes(a config.API) engine.EscapedSlashes {
	v, _ := engine.ParseEscapedSlashes(a.PathEscapedSlashes)
	return v
}
