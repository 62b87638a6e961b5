// Package api is the HTTP edge of a node (CONTRACT.md §4): decisions
// (:evaluate, :authorize, :mirror), policy resources, the cluster's status,
// generations and nodes, rollback, the cluster endpoints (join, leave,
// reconcile and the nodes' internal ones), health, readiness and metrics. It holds no
// business rules: decisions come from the compiled engine.Bundle of the
// generation the node serves, which reaches this package through the small
// Generations interface below (the node loader swaps it), and everything
// about the cluster through the Cluster interface (internal/cluster, which
// forwards writes to the leader).
//
// Every request passes the guard first (auth.go): the browser checks
// (origin.go) and the caller's role against the route table (roles.go),
// with an audit line for every write. The router (routes.go) then hands it
// to the handler of its resource family: decisions (decisions.go),
// policies and experiments (policies.go), operations
// (operations_handler.go), nodes (nodes.go), the cluster and its
// generations (clusterapi.go), webhooks (webhook.go) and the console
// (console.go). Each embeds the shared core (core.go) and holds only small
// interfaces to the parts of the node it uses. Every error answer is an
// AIP-193 JSON body; error kinds map to HTTP codes in one place
// (errors.go). The decision path logs nothing at info level and avoids
// reflection when it writes its answer.
package api

import (
	"bytes"
	"net/http"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Snapshot is one generation as the API serves it: immutable once
// published, so handlers read it without locks.
type Snapshot struct {
	Generation uint64
	// Commit is the git commit the generation was built from ("" when it
	// was loaded from a local directory).
	Commit string
	Bundle *engine.Bundle
}

// Generations gives the API the generations it may answer from.
type Generations interface {
	// Current returns the active generation, or nil before the first one
	// is loaded (decisions then answer 503).
	Current() *Snapshot
	// Get returns generation n if this node still keeps it (the active one
	// and the one before it), else nil.
	Get(n uint64) *Snapshot
}

// Mirror receives mirrored requests (:mirror) for preview only; preview
// implements it. Mirror must not block the caller: an implementation that
// cannot take a request now drops it and counts the drop. It may keep req.
type Mirror interface {
	Mirror(snap *Snapshot, policy string, req *engine.Request)
}

// Config holds a Server's dependencies.
type Config struct {
	// Generations is required.
	Generations Generations
	// Mirror is optional; without it, mirrored requests are counted only.
	Mirror Mirror
	// Logger is optional; nil discards.
	Logger hclog.Logger
	// TrustedProxies are the peers whose forwarding headers are believed.
	TrustedProxies []netip.Prefix
	// PathEscapedSlashes is what the gateway forms do with a path that
	// holds "%2F", "%5C" or a backslash ([api] path_escaped_slashes); the
	// zero value rejects it (engine.EscapedSlashes).
	PathEscapedSlashes engine.EscapedSlashes
	// MaxBodyBytes bounds request bodies; 0 means 1 MiB.
	MaxBodyBytes int64
	// MaxRequestHeaders bounds the headers of a decision request, in every
	// form; 0 means engine.DefaultMaxHeaders (limits.go).
	MaxRequestHeaders int
	// MaxDecisionsInFlight bounds the decisions worked on at once, in
	// every form; 0 means DefaultMaxDecisionsInFlight (limits.go).
	MaxDecisionsInFlight int
	// MaxDecisionBodiesPerSource bounds the decision bodies one source
	// address (an IPv6 /64) sends at once; 0 means
	// DefaultMaxDecisionBodiesPerSource (bodies.go).
	MaxDecisionBodiesPerSource int
	// DecisionBodyTimeout bounds the time a decision body takes to arrive;
	// 0 means DefaultDecisionBodyTimeout.
	DecisionBodyTimeout time.Duration
	// DecisionBodyBudget bounds the decision body bytes held at once; 0
	// means 64 MiB or 4 bodies of MaxBodyBytes, the larger.
	DecisionBodyBudget int64
	// Registry receives the API's metrics and is served at /metrics; nil
	// makes a new one. Other subsystems register on the same registry.
	Registry *prometheus.Registry
	// Now is the clock for receipt times; nil means time.Now.
	Now func() time.Time
	// Cluster serves the status, generation, node and cluster endpoints;
	// without it they answer 404 (a node always has one).
	Cluster Cluster
	// Token, when not empty, is one more admin credential, named "token"
	// (tests; a node passes its tokens in Credentials).
	Token string
	// Credentials are the role tokens (auth.go). With none (and no
	// Token) every caller may do everything: the loopback development
	// mode that config.CheckExposure allows.
	Credentials []auth.Credential
	// DecisionRole, when set, is the role decisions require; RoleNone
	// leaves the data plane open.
	DecisionRole auth.Role
	// AllowedOrigins are the browser origins allowed to call the API.
	AllowedOrigins []string
	// LoopbackOnly is set when the node listens on loopback only: then
	// API requests must name this machine in Host (origin.go).
	LoopbackOnly bool
	// Audit receives one line per write request (the "audit" subsystem);
	// nil uses Logger.
	Audit hclog.Logger
	// Snapshots serves GET /v1/snapshot (snapshot.go); without it the
	// endpoint answers 404.
	Snapshots Snapshotter
	// Rollback serves POST /v1/generations:rollback where the leader loop
	// runs; without it the endpoint answers 404.
	Rollback Rollbacker
	// Experiments changes experiments where the leader loop runs; without
	// it the experiment writes answer 404 (experiments.go).
	Experiments Experiments
	// Preview is the node's preview runtime: live decisions are offered to
	// it after their answer, and it holds the merged stats; optional.
	Preview Preview
	// Thresholds judge the experiments' stats by policy
	// ([preview.thresholds]): a GET shows the verdict as "summary".
	Thresholds preview.ThresholdSet
	// PreviewRuleCap is how many rules in preview of one policy are
	// evaluated (preview.max_experiments_per_policy; 0: the default); a
	// policy resource lists the others as not previewed.
	PreviewRuleCap int
	// Webhook, when set ([github]), serves POST /v1/webhooks/github;
	// Commands queues the comment commands it receives on the leader
	// (followers forward them). See webhook.go.
	Webhook  WebhookReceiver
	Commands CommandQueue
	// Parts reports the node's long-running parts by name, for
	// /v1/status; nil reports none.
	Parts func() map[string]lifecycle.Status
	// Records reads the leader loop's replicated records for /v1/status;
	// nil shows none.
	Records LeaderRecords
	// FailureModes say what the gateway forms answer when this node
	// cannot decide (authorize.go); the zero value denies.
	FailureModes FailureModes
	// PeerTLS says nodes talk over mutual TLS ([tls]): the node-only
	// endpoints (propose, heartbeat, webhook hand-off) then answer only on
	// PeerHandler, to a verified node.
	PeerTLS bool
	// States is this node's state for the decision path (nodes_state.go);
	// nil means always ACTIVE.
	States NodeState
	// Group is this node's group: decisions are answered only for the
	// policies of that group (a policy's `group`, default "default"), 404
	// for the others. "" serves every policy.
	Group string
}

// defaultMaxBodyBytes is the body limit when Config.MaxBodyBytes is 0.
const defaultMaxBodyBytes = 1 << 20

// pooledBufferMax is the largest buffer returned to the pool, so that one
// big request does not pin memory for the life of the process.
const pooledBufferMax = 64 << 10

// Server is the node's HTTP handler: the guard (auth.go, origin.go,
// peer.go) and the router (routes.go) over one handler per resource
// family, each with only the parts of the node it needs. The route table
// (roles.go) is the one list of routes and the role each needs; the
// table in docs/architecture.md names the handler of each. It is safe for
// concurrent use.
type Server struct {
	*core
	gens  Generations
	promH http.Handler
	// cluster is nil without a cluster (routes.go); the node port asks it
	// who is a member and who leads (peer.go).
	cluster peerCluster

	creds        *auth.Set
	authErr      error // credentials that did not load: guarded routes answer 500
	decisionRole auth.Role
	origins      map[string]string
	loopbackOnly bool
	audit        hclog.Logger

	dec   *decisions   // decisions.go
	pol   *policies    // policies.go
	ops   *operations  // operations_handler.go
	nod   *nodes       // nodes.go
	cl    *clusterAPI  // clusterapi.go
	hooks *webhooks    // webhook.go
	ui    consolePages // console.go
}

// peerCluster is the cluster as the guard and the router see it.
type peerCluster interface {
	IsMember(id string) bool
	Leader() string
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	c := &core{log: cfg.Logger, maxBody: cfg.MaxBodyBytes, leader: cfg.Cluster, peerTLS: cfg.PeerTLS}
	s := &Server{
		core:    c,
		gens:    cfg.Generations,
		cluster: cfg.Cluster,

		decisionRole: cfg.DecisionRole,
		origins:      originSet(cfg.AllowedOrigins),
		loopbackOnly: cfg.LoopbackOnly,
		audit:        cfg.Audit,
	}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	if s.audit == nil {
		s.audit = s.log
	}
	s.creds, s.authErr = credentialSet(cfg)
	if s.authErr != nil {
		s.log.Error("the API's credentials are invalid: every guarded request fails", "error", s.authErr)
	}
	if s.maxBody <= 0 {
		s.maxBody = defaultMaxBodyBytes
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(reg, s.gens)
	s.dec = newDecisions(c, cfg, reg, now)
	s.pol = newPolicies(c, cfg)
	s.ops = newOperations(c, cfg)
	s.nod = newNodes(c, cfg, s.dec)
	s.cl = newClusterAPI(c, cfg, s.audit, s.nod, s.pol)
	s.hooks = &webhooks{core: c, webhook: cfg.Webhook, commands: cfg.Commands, cluster: cfg.Cluster}
	s.promH = s.metrics.handler()
	s.bufs.New = func() any { return new(bytes.Buffer) }
	return s
}

// Registry returns the registry that /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// The data plane's exported methods, for the gRPC gateway form
// (internal/extauthz) and the node's status; decisions.go serves them.

// Authorize decides a gateway check (authorize.go).
func (s *Server) Authorize(check *GatewayCheck, policy string, gen uint64) GatewayAnswer {
	return s.dec.Authorize(check, policy, gen)
}

// AdmitDecision takes a place among the decisions in flight (limits.go).
func (s *Server) AdmitDecision(form string) bool { return s.dec.AdmitDecision(form) }

// DoneDecision gives back the place AdmitDecision took.
func (s *Server) DoneDecision() { s.dec.DoneDecision() }

// MaxDecisionsInFlight is the bound AdmitDecision enforces.
func (s *Server) MaxDecisionsInFlight() int { return s.dec.MaxDecisionsInFlight() }

// ReceivingDecision admits one decision body from src (bodies.go).
func (s *Server) ReceivingDecision(form string, src netip.Addr) bool {
	return s.dec.ReceivingDecision(form, src)
}

// ReceivedDecision gives back what ReceivingDecision took.
func (s *Server) ReceivedDecision(src netip.Addr) { s.dec.ReceivedDecision(src) }

// MaxDecisionBodiesPerSource is the bound ReceivingDecision enforces.
func (s *Server) MaxDecisionBodiesPerSource() int { return s.dec.MaxDecisionBodiesPerSource() }

// DecisionStats counts the decisions answered and failed (stats.go).
func (s *Server) DecisionStats() (ok, failed uint64) { return s.dec.DecisionStats() }
