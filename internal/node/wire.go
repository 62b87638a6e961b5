package node

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// raftDir is where raft keeps its log and snapshots inside node.data_dir.
const raftDir = "raft"

// openStore opens raft in {data_dir}/raft. The replicated state is
// restored from disk before it returns.
func (m *Main) openStore() error {
	n := m.Config.Node
	stream, err := m.port.streamLayer()
	if err != nil {
		return err
	}
	s, err := raftstore.Open(raftstore.Config{
		StreamLayer:   stream,
		NodeID:        n.ID,
		RaftAddr:      n.RaftAddr,
		AdvertiseAddr: n.RaftAdvertiseAddr,
		DataDir:       filepath.Join(n.DataDir, raftDir),
		Bootstrap:     n.Bootstrap,
		Logger:        m.Logger,
	})
	if err != nil {
		return fmt.Errorf("open raft store: %w", err)
	}
	m.store = s
	return nil
}

// wire builds the parts around the store: cluster layer, leader loop,
// loader and API, on one metrics registry.
func (m *Main) wire(ctx context.Context) error {
	cfg := m.Config
	m.registry = prometheus.NewRegistry()
	m.port.registerNodePortMetrics(m.registry)
	m.port.registerCertificateMetrics(m.registry)
	token := cfg.Secret(cfg.API.TokenEnv)
	client := m.port.peerClient(0)
	c, err := cluster.New(cluster.Config{
		NodeID:     cfg.Node.ID,
		Store:      m.store,
		JoinAddrs:  cfg.Node.Join,
		Token:      token,
		Reconciler: triggerFunc(func() { m.loop.Trigger() }),
		Source:     m.sourceStatus,
		Client:     client,
		PeerTLS:    m.port.secure(),
		Probe:      m.port.probe,
		Logger:     m.Logger.Named(logging.Node),

		HeartbeatTimeout: cfg.Node.HeartbeatTimeout.Duration,
		StagingTimeout:   cfg.Node.StagingTimeout.Duration,
		FollowTimeout:    cfg.Node.FollowTimeout.Duration,
		// The status and the health check read parts built below; they
		// are called only once the node runs.
		Status:     func() cluster.NodeStatus { return m.status.pdpStatus() },
		NodeFailed: func(id string) { m.status.nodeFailed(id) },
		SelfCheck: func(ctx context.Context, leaderIndex uint64) cluster.HealthReport {
			return m.health.check(ctx, leaderIndex)
		},
		Settings:    nodeSettings(cfg),
		KnownGroups: m.knownGroups,
		Groups:      cfg.DeclaredSubgroups(),
	})
	if err != nil {
		return err
	}
	m.cluster = c
	// The leader proposes only what every voter's release can apply.
	m.store.SetClusterVersion(c.Version)
	m.state.id = cfg.Node.ID
	if err := m.wireLeaderAndLoader(ctx); err != nil {
		return err
	}
	m.registry.MustRegister(newRaftCollector(c.RaftState), newDiskCollector(m.store))
	if m.preview, err = m.newPreviewRuntime(engine.DefaultOptions()); err != nil {
		return err
	}
	c.SetPiggyback(m.preview) // preview stats ride on the heartbeats
	m.api = api.New(api.Config{
		Generations:    &m.gens,
		Logger:         m.Logger.Named(logging.API),
		TrustedProxies: cfg.API.TrustedPrefixes(),
		MaxBodyBytes:   cfg.API.MaxBodyBytes,
		Registry:       m.registry,
		Cluster:        c,
		Credentials:    m.creds,
		DecisionRole:   decisionRole(cfg.API.DecisionRole),
		AllowedOrigins: cfg.API.AllowedOrigins,
		LoopbackOnly:   auth.LoopbackAddr(cfg.Node.HTTPAddr),
		Audit:          m.Logger.Named(logging.Audit),
		Rollback:       rollbacks{m},
		Snapshots:      snapshots{m},
		Records:        reconcile.StatusRecords{},
		Experiments:    m.experiments,
		Preview:        m.preview,
		Mirror:         m.preview,
		Thresholds:     previewThresholds(cfg.Preview),
		PreviewRuleCap: cfg.Preview.MaxExperimentsPerPolicy,
		Webhook:        m.webhookHandler(),
		Commands:       m.commandQueue(),
		Parts:          m.parts.Statuses,
		FailureModes:   failureModes(cfg.API),
		PeerTLS:        m.port.secure(),
		States:         &m.state,
		Group:          cfg.Node.Group,

		PathEscapedSlashes:   pathSlashes(cfg.API),
		MaxRequestHeaders:    cfg.API.MaxRequestHeaders,
		MaxDecisionsInFlight: cfg.API.MaxDecisionsInFlight,

		MaxDecisionBodiesPerSource: cfg.API.MaxDecisionBodiesPerSource,
	})
	m.wireHealthAndStatus()
	m.addParts()
	return nil
}

// wireHealthAndStatus builds this node's health check and PDP_STATUS from
// the parts they read.
func (m *Main) wireHealthAndStatus() {
	cfg := m.Config
	m.health = &selfChecker{self: cfg.Node.ID, dataDir: cfg.Node.DataDir, queueSize: cfg.Preview.QueueSize,
		store: m.store, loop: m.loop, gens: &m.gens, state: &m.state, preview: m.preview, healthy: &m.healthy}
	m.status = &statusReporter{version: m.Version, node: cfg.Node, settings: nodeSettings(cfg), state: &m.state,
		healthy: &m.healthy, gens: &m.gens, decisions: m.api, metrics: m.loader.metrics}
}

// wireLeaderAndLoader builds the leader loop and the node loader, which
// must load and compile with the same options.
func (m *Main) wireLeaderAndLoader(ctx context.Context) error {
	cfg := m.Config
	lopts := policy.LoadOptions{MergeDefault: cfg.Policy.MergeDefault}
	eopts := engine.DefaultOptions()
	src, err := m.openSource(ctx, lopts)
	if err != nil {
		return err
	}
	if err := m.wireLeader(src, lopts, eopts); err != nil {
		return err
	}
	m.loader = newLoader(loader{
		nodeID:  cfg.Node.ID,
		store:   m.store,
		propose: m.cluster.Propose,
		compile: compileFor(cfg.Node.Group, lopts, eopts),
		gens:    &m.gens,
		log:     m.Logger.Named(logging.Node),
		metrics: newNodeMetrics(m.registry),
		state:   &m.state,
		stop:    m.fail,
		share:   src.ShareBlobs,

		dropLogPages: m.store.ReleaseLogPages,
		offload:      serially(),
	})
	return nil
}

// self is this node's join request: who it is and where to reach it.
func (m *Main) self() cluster.JoinRequest {
	n := m.Config.Node
	httpAddr := n.HTTPAdvertiseAddr
	if httpAddr == "" {
		httpAddr = m.Addr()
	}
	return cluster.JoinRequest{ID: n.ID, RaftAddr: m.store.Addr(), HTTPAddr: httpAddr, Voter: n.Voter,
		Group: n.Group, Subgroup: n.Subgroup, Settings: nodeSettings(m.Config)}
}

// sourceStatus is the leader loop's last read, for the cluster view.
func (m *Main) sourceStatus() cluster.SourceStatus {
	s := m.loop.SourceStatus()
	out := cluster.SourceStatus{Commit: s.Commit, Error: s.Error, Time: s.Time}
	if d := s.Diverged; d != nil {
		out.Diverged = &cluster.Divergence{Commit: d.Commit, Active: d.Active, Since: d.Since}
	}
	return out
}

// triggerFunc adapts a function to cluster.Trigger.
type triggerFunc func()

func (f triggerFunc) Trigger() { f() }
