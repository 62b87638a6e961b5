package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Defaults for Config fields left zero.
const (
	// DefaultHeartbeatInterval is how often every node tells the leader it
	// is alive and which generation it serves.
	DefaultHeartbeatInterval = 500 * time.Millisecond
	// ReachableIntervals heartbeat intervals without a heartbeat make a
	// node unreachable: the leader stops waiting for its Ready.
	ReachableIntervals = 3
	// DefaultForwardTimeout bounds one forwarded write, retries included.
	DefaultForwardTimeout = 5 * time.Second
	// DefaultDialTimeout bounds the leader's check that a joining node's
	// raft address accepts connections.
	DefaultDialTimeout = 2 * time.Second
)

// Store is what the cluster layer needs from raftstore.Store; tests give
// it fakes.
type Store interface {
	IsLeader() bool
	Leader() (id, addr string)
	State() *raftstore.State
	Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)
	Apply(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error)
	AddVoter(id, addr string) error
	AddNonvoter(id, addr string) error
	RemoveServer(id string) error
	Servers() ([]raft.Server, error)
	Stats() map[string]string
	// WaitForIndex and SendCommit serve read-your-writes through a
	// follower (catchup.go).
	WaitForIndex(ctx context.Context, index uint64) error
	SendCommit()
}

var _ Store = (*raftstore.Store)(nil)

// Trigger asks the leader loop to reconcile soon; calls coalesce.
type Trigger interface {
	Trigger()
}

// Config holds a Cluster's dependencies.
type Config struct {
	// NodeID is this node's id (the raft server id).
	NodeID string
	// Store is this node's raft store. Required.
	Store Store
	// JoinAddrs are HTTP addresses of members, asked when no leader is
	// known (node.join).
	JoinAddrs []string
	// Token is sent as a bearer token on forwarded requests ([api]
	// token_env), "" for none.
	Token string
	// Reconciler receives reconcile requests while this node leads.
	Reconciler Trigger
	// Source reports the leader loop's last read of the policy source, for
	// the view; nil reports nothing.
	Source func() SourceStatus
	// Status returns this node's PDP_STATUS for its heartbeats; nil sends
	// none.
	Status func() NodeStatus
	// NodeFailed is told, on the leader, of each node that went past the
	// heartbeat timeout (once until it is heard from again); optional.
	NodeFailed func(id string)
	// SelfCheck checks this node for health checks (health.go); nil
	// answers NOT_HEALTHY.
	SelfCheck SelfChecker
	// Settings are this node's decision-affecting settings, and
	// KnownGroups the groups the active generation's policies name: a
	// joining node that differs, or names another group, joins PASSIVE
	// (consistency.go). Nil checks nothing.
	Settings    Settings
	KnownGroups func() []string
	// Groups are the declared groups and their subgroups, "default"
	// included ([groups] of the config): a group declared here is known
	// without a policy, and a joining node's subgroup must be declared for
	// its group. Checked only with KnownGroups.
	Groups map[string][]string
	// Client sends forwarded requests; nil means a client with no overall
	// timeout (each call has its own deadline). With PeerTLS it must
	// present the node certificate (tlsconfig.Node.HTTPTransport).
	Client *http.Client
	// PeerTLS makes nodes talk over mutual TLS on their raft ports
	// ([tls]): forwarded calls go to https://<leader raft address>,
	// JoinAddrs are raft addresses, and node-to-node requests (reports,
	// heartbeats, address changes) are accepted only from the verified
	// node they speak for (see WithPeer).
	PeerTLS bool
	// Probe checks, before a node is added to the raft configuration,
	// that the node at addr answers raft (and, with TLS, proves it is
	// id); nil sends raftstore.Probe over plain TCP.
	Probe func(ctx context.Context, id, addr string) error
	// Logger; nil discards.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HeartbeatInterval, ForwardTimeout and DialTimeout default to the
	// constants above.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long without a heartbeat makes a node
	// unreachable (failed): the leader stops waiting for it. Zero means
	// ReachableIntervals heartbeat intervals.
	HeartbeatTimeout time.Duration
	// StagingTimeout is how long the leader waits for a reachable node's
	// Ready before promoting without it (staging.go); zero means
	// DefaultStagingTimeout.
	StagingTimeout time.Duration
	// FollowTimeout is how long a node may go without applying an entry
	// the leader had applied before the leader promotes without it
	// (follow.go); zero means DefaultFollowTimeout. It is capped at
	// StagingTimeout.
	FollowTimeout  time.Duration
	ForwardTimeout time.Duration
	DialTimeout    time.Duration
}

// Cluster is one node's view of and access to the cluster: writes that
// only the leader can do (tried here first, forwarded otherwise),
// membership, heartbeats and leadership. It is safe for concurrent use.
//
// Cluster is the API the rest of the node calls; each part of the work is
// a type of its own, built once in New: forwarding (forwarder), joins and
// leaves (members), who joins PASSIVE (admission), heartbeat views
// (viewBuilder), failed and lagging nodes (failureWatch), health checks
// (healthChecks), releases (versions) and which nodes a staged generation
// waits for (staging).
type Cluster struct {
	cfg   Config
	store Store
	log   hclog.Logger
	fwd   *forwarder
	hb    *heartbeats
	view  viewHolder

	members  *members
	admit    *admission
	views    *viewBuilder
	failures *failureWatch
	health   *healthChecks
	versions *versions
	staging  *staging
}

// New returns a Cluster for cfg.
func New(cfg Config) (*Cluster, error) {
	if cfg.Store == nil || cfg.NodeID == "" {
		return nil, errors.New("cluster: Store and NodeID are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Client.CheckRedirect == nil {
		cl := *cfg.Client
		cl.CheckRedirect = FollowLeader
		cfg.Client = &cl
	}
	cfg.HeartbeatInterval = orDefault(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.ForwardTimeout = orDefault(cfg.ForwardTimeout, DefaultForwardTimeout)
	cfg.DialTimeout = orDefault(cfg.DialTimeout, DefaultDialTimeout)
	if cfg.Probe == nil {
		cfg.Probe = func(_ context.Context, _, addr string) error {
			return raftstore.Probe(raftstore.TCPDial, addr, cfg.DialTimeout)
		}
	}
	cfg.StagingTimeout = orDefault(cfg.StagingTimeout, DefaultStagingTimeout)
	c := &Cluster{cfg: cfg, store: cfg.Store, log: cfg.Logger}
	c.fwd = &forwarder{self: cfg.NodeID, store: cfg.Store, client: cfg.Client, token: cfg.Token,
		joinAddrs: cfg.JoinAddrs, timeout: cfg.ForwardTimeout, peerTLS: cfg.PeerTLS}
	c.hb = newHeartbeats(cfg.Now, orDefault(cfg.HeartbeatTimeout, ReachableIntervals*cfg.HeartbeatInterval))
	c.hb.followTimeout = min(orDefault(cfg.FollowTimeout, DefaultFollowTimeout), cfg.StagingTimeout)
	c.wire()
	return c, nil
}

// wire builds the parts of c, each with only what it needs.
func (c *Cluster) wire() {
	cfg := c.cfg
	c.admit = &admission{self: cfg.NodeID, settings: cfg.Settings, groups: cfg.Groups, knownGroups: cfg.KnownGroups,
		store: c.store, log: c.log}
	c.members = &members{store: c.store, probe: cfg.Probe, peerTLS: cfg.PeerTLS, admit: c.admit, log: c.log}
	c.views = &viewBuilder{self: cfg.NodeID, now: cfg.Now, interval: cfg.HeartbeatInterval, source: cfg.Source,
		statusFn: cfg.Status, hb: c.hb}
	c.failures = &failureWatch{store: c.store, hb: c.hb, log: c.log, nodeFailed: cfg.NodeFailed}
	c.health = &healthChecks{self: cfg.NodeID, store: c.store, selfCheck: cfg.SelfCheck, fwd: c.fwd, peerTLS: cfg.PeerTLS}
	c.versions = &versions{self: cfg.NodeID, store: c.store, hb: c.hb, view: &c.view, status: c.views.status}
	c.staging = &staging{self: cfg.NodeID, now: cfg.Now, timeout: cfg.StagingTimeout, hb: c.hb, log: c.log}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// NodeID returns this node's id.
func (c *Cluster) NodeID() string { return c.cfg.NodeID }

// State returns the replicated state as this node has applied it.
func (c *Cluster) State() *raftstore.State { return c.store.State() }

// Leader returns the leader's id, "" when none is known.
func (c *Cluster) Leader() string {
	id, _ := c.store.Leader()
	return id
}

// RaftState returns raft's state name: Leader, Follower, Candidate or
// Shutdown.
func (c *Cluster) RaftState() string { return c.store.Stats()["state"] }

// Propose applies p through the leader: locally when this node leads,
// else forwarded as a command with its time stamped here. Only the
// command types in the forwardable set may be forwarded.
func (c *Cluster) Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error) {
	ctx = withLocal(ctx)
	if f, ok := p.(*raftstore.ReportFailed); ok {
		f.Errors = capErrors(f.Errors)
	}
	if c.store.IsLeader() {
		res, err := c.store.Propose(ctx, p)
		if !errors.Is(err, raftstore.ErrNotLeader) {
			return res, err
		}
	}
	stamp(p, c.cfg.Now())
	cmd, err := raftstore.NewCommand(p)
	if err != nil {
		return raftstore.Result{}, err
	}
	return c.ProposeCommand(ctx, cmd)
}

// ProposeCommand applies a command a node sent through the internal
// propose endpoint (or forwards it there).
func (c *Cluster) ProposeCommand(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error) {
	if !forwardable[cmd.Type] {
		return raftstore.Result{}, fmt.Errorf("%w: %s", ErrNotForwardable, cmd.Type)
	}
	id, err := reportNode(cmd)
	if err != nil {
		return raftstore.Result{}, err
	}
	if err := checkSpeaker(ctx, c.cfg.PeerTLS, id, "report"); err != nil {
		return raftstore.Result{}, err
	}
	if cmd.Type == raftstore.TypeReportFailed && cmd.Version < raftstore.ReportFailedVersion {
		// A node of an older build (a rolling upgrade) writes version 1,
		// which would make the generation INVALID for everyone; the
		// payload is the same, and whether one node's failure stops a
		// rollout is the leader's rule, not the reporting node's.
		cmd.Version = raftstore.ReportFailedVersion
	}
	var res raftstore.Result
	var answer ProposeResponse
	err = c.fwd.viaLeader(ctx, PathPropose, cmd, &answer, func() error {
		var err error
		res, err = c.store.Apply(ctx, cmd)
		return err
	})
	if answer.Index != 0 {
		res.Index = answer.Index
	}
	return res, err
}

// Reconcile asks the leader loop to read the policy source now.
func (c *Cluster) Reconcile(ctx context.Context) error {
	return c.fwd.viaLeader(ctx, PathReconcile, struct{}{}, nil, func() error {
		if c.cfg.Reconciler == nil {
			return errors.New("this node has no reconcile loop")
		}
		c.cfg.Reconciler.Trigger()
		return nil
	})
}

// stamp sets the report time of a payload forwarded to the leader, which
// Store.Propose would otherwise set; the proposer decides every time.
func stamp(p raftstore.Payload, now time.Time) {
	switch v := p.(type) {
	case *raftstore.ReportReady:
		if v.Time.IsZero() {
			v.Time = now
		}
	case *raftstore.ReportFailed:
		if v.Time.IsZero() {
			v.Time = now
		}
	}
}
