// Package node wires one reconciler daemon in-process: configuration,
// logging, the policy generations it serves and the HTTP API. Main is the
// whole daemon as a value, so tests run it on 127.0.0.1:0 with a
// t.TempDir() exactly as `reconciler serve` does.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/logging"
)

// DefaultShutdownTimeout bounds a graceful stop: in-flight requests get this
// long to finish before connections are closed.
const DefaultShutdownTimeout = 10 * time.Second

// Main is one node. Set the exported fields, call Run, then Close (or
// cancel Run's context and call Wait).
type Main struct {
	// Config is required and must have been validated.
	Config *config.Config
	// Logger is the root logger; nil discards.
	Logger hclog.Logger
	// ShutdownTimeout bounds Close; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	gens     generations
	registry *prometheus.Registry
	api      *api.Server
	ln       net.Listener
	http     *http.Server

	served    chan struct{} // closed when the HTTP server has returned
	serveErr  error         // why it returned, if not because of Close
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// Run starts the node and returns once it is listening with its first
// generation loaded. Cancelling ctx stops the node as Close does.
func (m *Main) Run(ctx context.Context) error {
	if m.Config == nil {
		return errors.New("node: no configuration")
	}
	if m.Logger == nil {
		m.Logger = hclog.NewNullLogger()
	}
	if m.ShutdownTimeout <= 0 {
		m.ShutdownTimeout = DefaultShutdownTimeout
	}
	m.done = make(chan struct{})
	m.served = make(chan struct{})
	log := m.Logger.Named(logging.Node)

	if err := os.MkdirAll(m.Config.Node.DataDir, 0o750); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	snap, err := loadLocal(m.Config, 1)
	if err != nil {
		return err
	}
	m.gens.activate(snap)
	log.Info("generation active", "generation", snap.Generation, "policies", len(snap.Bundle.Names()), "source", m.Config.Git.InitFrom)

	if err := m.startHTTP(); err != nil {
		return err
	}
	log.Info("listening", "addr", m.Addr(), "node_id", m.Config.Node.ID)
	go m.stopOnCancel(ctx)
	return nil
}

// startHTTP binds node.http_addr and serves the API in the background.
func (m *Main) startHTTP() error {
	m.registry = prometheus.NewRegistry()
	m.api = api.New(api.Config{
		Generations:    &m.gens,
		Logger:         m.Logger.Named(logging.API),
		TrustedProxies: m.Config.API.TrustedPrefixes(),
		MaxBodyBytes:   m.Config.API.MaxBodyBytes,
		Registry:       m.registry,
	})
	ln, err := net.Listen("tcp", m.Config.Node.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on node.http_addr: %w", err)
	}
	m.ln = ln
	m.http = &http.Server{
		Handler:           m.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          m.Logger.Named(logging.API).StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	go func() {
		defer close(m.served)
		if err := m.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			m.serveErr = err
		}
	}()
	return nil
}

// stopOnCancel closes the node when ctx ends or the HTTP server fails on
// its own, unless Close came first. The error reaches Wait's caller.
func (m *Main) stopOnCancel(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-m.served:
	case <-m.done:
		return
	}
	_ = m.Close()
}

// Addr returns the address the API listens on (useful with port 0), or ""
// before Run.
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Generations returns the generations the node serves.
func (m *Main) Generations() api.Generations { return &m.gens }

// Registry returns the Prometheus registry that /metrics serves, for other
// subsystems to register on.
func (m *Main) Registry() *prometheus.Registry { return m.registry }

// Close stops the node gracefully: no new connections, in-flight requests
// finish within ShutdownTimeout. It is safe to call more than once.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		if m.done != nil {
			defer close(m.done)
		}
		if m.http == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.ShutdownTimeout)
		defer cancel()
		if err := m.http.Shutdown(ctx); err != nil {
			m.closeErr = fmt.Errorf("shut down HTTP server: %w", err)
			_ = m.http.Close()
		}
		<-m.served
		if m.serveErr != nil && m.closeErr == nil {
			m.closeErr = fmt.Errorf("serve HTTP: %w", m.serveErr)
		}
		m.Logger.Named(logging.Node).Info("stopped")
	})
	return m.closeErr
}

// Wait blocks until the node has stopped (Close, or Run's context ended)
// and returns the error that stopped it, if any.
func (m *Main) Wait() error {
	<-m.done
	return m.closeErr
}
