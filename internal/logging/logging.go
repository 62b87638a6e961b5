// Package logging builds the process's one root go-hclog logger from
// config.toml's [log] section. Subsystems take a child with Named and one of
// the name constants below, so every line says where it came from and
// operators can filter on a fixed vocabulary.
package logging

import (
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/config"
)

// Subsystem names, for root.Named(...). Use these rather than literals.
const (
	API       = "api"
	Node      = "node"
	Raft      = "raft"
	Git       = "git"
	Preview   = "preview"
	Webhook   = "webhook"
	Forge     = "forge"
	Reconcile = "reconcile"
	Engine    = "engine"
	ExtAuthz  = "extauthz"
	// Audit receives one line per write to the API: who, what, answer.
	Audit = "audit"
	// TLS is node-to-node TLS: refused connections on the raft port,
	// certificate reloads.
	TLS = "tls"
)

// RootName is the name of the root logger.
const RootName = "reconciler"

// New returns the root logger writing to w with the configured level and
// format. An unknown level (impossible after config validation) means info.
func New(cfg config.Log, w io.Writer) hclog.Logger {
	level := hclog.LevelFromString(cfg.Level)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       RootName,
		Level:      level,
		Output:     w,
		JSONFormat: cfg.Format == "json",
		Color:      hclog.ColorOff,
		// Named children follow SetLevel on the root, for a later runtime switch.
		SyncParentLevel: true,
	})
}
