// Package node wires one reconciler daemon in-process: configuration,
// logging, the raft store, the cluster layer, the node loader that serves
// replicated generations, the leader's parts (reconcile loop, experiment
// service, GitHub worker: leader.go) and the HTTP API. The long-running
// parts share one lifecycle (internal/lifecycle, parts.go). Main is the
// whole daemon as a value, so tests run clusters of it on 127.0.0.1 with
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
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/extauthz"
	"github.com/policyrollout/reconciler/internal/github"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// DefaultShutdownTimeout bounds a graceful stop: in-flight requests get this
// long to finish before connections are closed.
const DefaultShutdownTimeout = 10 * time.Second

// Main is one node. Set the exported fields, call Run, then Close (or
// cancel Run's context and call Wait).
type Main struct {
	// Config is required, must have been validated, and must not change
	// after Run.
	Config *config.Config
	// Logger is the root logger; nil discards.
	Logger hclog.Logger
	// ShutdownTimeout bounds Close; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Version is the build's version, reported in heartbeats; "" is "dev".
	Version string
	// Validator validates the trees the leader judges; nil validates in
	// this process (tests of internal packages, which have no reconciler
	// binary to run). `reconciler serve` sets a sandbox.Worker's.
	Validator reconcile.Validator
	// Repack is where the leader's clone housekeeping writes its pack: a
	// child of the reconciler binary (`reconciler serve` sets it), or
	// this process when its Path is "" (tests of internal packages).
	Repack gitsource.RepackChild
	// CheckPolicy compiles the policy of an experiment submitted through
	// the API; nil compiles in this process. `reconciler serve` sets the
	// same sandbox.Runner's.
	CheckPolicy experiments.PolicyChecker

	gens        generations
	registry    *prometheus.Registry
	store       *raftstore.Store
	cluster     *cluster.Cluster
	loop        *reconcile.Loop
	experiments *experiments.Service
	github      *github.Worker // nil without [github]
	loader      *loader
	state       nodeState
	healthy     atomic.Pointer[string] // the last health check's result
	health      *selfChecker
	status      *statusReporter
	preview     *previewRuntime
	api         *api.Server
	creds       []auth.Credential
	ln          net.Listener
	http        *http.Server
	grpc        *extauthz.Server // nil without [api] grpc_addr
	port        *nodePort        // node-to-node traffic, over [tls] when set

	// parts are the long-running parts (parts.go), started and stopped
	// together and reported by /v1/status.
	parts    lifecycle.Manager
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	served    chan struct{} // closed when the HTTP server has returned
	serveErr  error         // why it returned, if not because of Close
	fatal     chan error    // a background part that cannot go on
	fatalMu   sync.Mutex
	fatalErr  error
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// Run starts the node and returns once it is listening. It serves the
// generation that was active when the node stopped at once, without a
// leader and without reading the policy source; until a first generation
// is active anywhere, /readyz and decisions answer 503. Joining the
// cluster (node.join) and rejoining after a restart happen in the
// background. Cancelling ctx stops the node as Close does.
func (m *Main) Run(ctx context.Context) (err error) {
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
	m.fatal = make(chan error, 1)
	if m.creds, err = checkExposure(m.Config, m.Logger.Named(logging.Node)); err != nil {
		return err
	}
	if err := m.prepareSource(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(m.Config.Node.DataDir, 0o750); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if m.ln, err = net.Listen("tcp", m.Config.Node.HTTPAddr); err != nil {
		return fmt.Errorf("listen on node.http_addr: %w", err)
	}
	defer func() {
		if err != nil {
			m.abort()
		}
	}()
	if m.ln, err = serveTLS(m.ln, m.Config, m.Logger); err != nil {
		return err
	}
	if m.port, err = openNodePort(m.Config, m.Logger); err != nil {
		return err
	}
	if err := m.openStore(); err != nil {
		return err
	}
	if err := m.wire(ctx); err != nil {
		return err
	}
	m.state.follow(m.store.State()) // a restarted PASSIVE node stays out of service
	m.loader.load(m.store.State())  // the restored generation, before serving
	if err := m.startGRPC(ctx); err != nil {
		return err
	}
	m.startBackground()
	m.startHTTP()
	m.port.startPeerHTTP(m.api.PeerHandler())
	log := m.Logger.Named(logging.Node)
	log.Info("listening", "addr", m.Addr(), "node_id", m.Config.Node.ID, "raft_addr", m.store.Addr(),
		"generation", m.gens.served())
	go m.stopOnCancel(ctx)
	return nil
}

// abort releases what a failed Run acquired.
func (m *Main) abort() {
	m.stopBackground()
	if m.store != nil {
		_ = m.store.Close()
	}
	m.port.closeTLS()
	if m.ln != nil {
		_ = m.ln.Close()
	}
	_ = m.stopGRPC()
	m.closeOnce.Do(func() { close(m.done) })
}

// startHTTP serves the API on the bound listener in the background.
func (m *Main) startHTTP() {
	m.http = &http.Server{
		Handler:           m.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// WriteTimeout bounds how long a client that does not read its
		// answer holds a connection; it covers the longest a handler may
		// wait (a rollback: api.MaxHandlerTime, 7 minutes) plus writing.
		WriteTimeout:   api.MaxHandlerTime + time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       m.Logger.Named(logging.API).StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	go func() {
		defer close(m.served)
		if err := m.http.Serve(m.ln); !errors.Is(err, http.ErrServerClosed) {
			m.serveErr = err
		}
	}()
}

// startBackground starts the parts that run for the life of the node.
func (m *Main) startBackground() {
	ctx, cancel := context.WithCancel(context.Background())
	m.bgCancel = cancel
	_ = m.parts.Start(ctx) // the parts' Start cannot fail
	m.goBackground(func() {
		if err := m.cluster.Register(ctx, m.self()); err != nil && ctx.Err() == nil {
			m.fail(err)
		}
	})
}

// stopBackground stops the parts, last started first, and the other
// background work.
func (m *Main) stopBackground() {
	if m.bgCancel == nil {
		return
	}
	m.bgCancel()
	m.parts.Stop(context.Background()) // each part's work ends with bgCancel; wait for it
	m.bg.Wait()
}

func (m *Main) goBackground(fn func()) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		fn()
	}()
}

// lead runs while this node is the leader: it records the leader in the
// registry (which also makes sure every earlier entry is applied), then
// runs the reconcile loop (Start) until leadership ends (Stop).
func (m *Main) lead(ctx context.Context) {
	log := m.Logger.Named(logging.Reconcile)
	for ctx.Err() == nil {
		err := m.cluster.RegisterSelf(ctx, m.self())
		if err == nil {
			break
		}
		if cluster.Permanent(err) {
			log.Error("cannot record this node in the registry", "error", err)
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := m.loop.Start(ctx); err != nil {
		log.Error("cannot start the leader loop", "error", err)
		return
	}
	<-ctx.Done()
	m.loop.Stop(context.Background()) // its work ends with ctx; wait for it
}

// fail stops the node because a background part cannot go on (e.g. the
// cluster refused to let it join); Wait returns err.
func (m *Main) fail(err error) {
	m.Logger.Named(logging.Node).Error("stopping", "error", err)
	m.fatalMu.Lock()
	if m.fatalErr == nil {
		m.fatalErr = err
	}
	m.fatalMu.Unlock()
	select {
	case m.fatal <- err:
	default:
	}
}

// stopOnCancel closes the node when ctx ends, the HTTP server fails on its
// own or a background part fails, unless Close came first. The error
// reaches Wait's caller.
func (m *Main) stopOnCancel(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-m.served:
	case <-m.fatal:
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

// Store returns the node's raft store (nil before Run).
func (m *Main) Store() *raftstore.Store { return m.store }

// Cluster returns the node's cluster layer (nil before Run).
func (m *Main) Cluster() *cluster.Cluster { return m.cluster }

// Close stops the node gracefully: background work stops, in-flight
// requests finish within ShutdownTimeout, then raft stops. The node stays
// a member of the cluster: a restart with the same data directory rejoins
// as the same member (leaving is POST /v1/cluster:leave). It is safe to
// call more than once.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		if m.done != nil {
			defer close(m.done)
		}
		var errs []error
		m.fatalMu.Lock()
		errs = append(errs, m.fatalErr)
		m.fatalMu.Unlock()
		if m.bgCancel != nil {
			m.stopBackground()
			m.cluster.Farewell(context.Background(), m.gens.served()) // TERMINATED
		}
		errs = append(errs, m.stopGRPC(), m.stopHTTP())
		if m.store != nil {
			if err := m.store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close raft store: %w", err))
			}
		}
		m.port.closeTLS()
		m.closeErr = errors.Join(errs...)
		m.Logger.Named(logging.Node).Info("stopped")
	})
	return m.closeErr
}

func (m *Main) stopHTTP() error {
	if m.http == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.ShutdownTimeout)
	defer cancel()
	var err error
	if perr := m.port.stopPeerHTTP(ctx); perr != nil {
		err = fmt.Errorf("shut down the node-to-node HTTP server: %w", perr)
	}
	if serr := m.http.Shutdown(ctx); serr != nil {
		err = fmt.Errorf("shut down HTTP server: %w", serr)
		_ = m.http.Close()
	}
	<-m.served
	if m.serveErr != nil && err == nil {
		err = fmt.Errorf("serve HTTP: %w", m.serveErr)
	}
	return err
}

// Wait blocks until a started node has stopped (Close, Run's context
// ended, the HTTP server failed, or the cluster refused the node) and
// returns the error that stopped it, if any. Call it only after Run
// succeeded.
func (m *Main) Wait() error {
	<-m.done
	return m.closeErr
}
