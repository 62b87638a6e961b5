package api

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/version"
)

// clusterAPI serves the cluster as a whole: its status, its generations,
// the operator's custom methods on them (rollback, acceptHistory), the
// raft snapshot, and the /v1/cluster:{verb} calls that change the
// membership (join, leave) or that nodes make of each other (propose,
// heartbeat, reconcile, selfCheck).
type clusterAPI struct {
	*core
	// nodeViews and previewRules render the nodes and the rules in
	// preview inside the status (nodes, policies).
	nodeViews
	previewRules
	gens Generations
	// cluster is nil without a cluster: the routes then answer 404.
	cluster    clusterNode
	audit      hclog.Logger
	parts      func() map[string]lifecycle.Status
	records    LeaderRecords
	rollbacker Rollbacker
	snapshots  Snapshotter
	// snapshotGate lets one snapshot be taken at a time (snapshot.go).
	snapshotGate snapshotGate
}

// nodeViews renders node resources (nodes).
type nodeViews interface {
	nodeResource(n raftstore.Node, st *raftstore.State, v cluster.View) apiv1.Node
	nodeResources(st *raftstore.State, v cluster.View) []apiv1.Node
}

// previewRules lists the rules in preview of a generation (policies).
type previewRules interface {
	allPreviewRules(snap *Snapshot) []preview.RuleView
}

// clusterNode is the cluster as this family uses it: what the status
// shows, and the membership and node-to-node calls.
type clusterNode interface {
	clusterStatus
	clusterCalls
}

// clusterStatus is what /v1/status, the generations and the snapshot read.
type clusterStatus interface {
	stateReader
	View() cluster.View
	NodeID() string
	Leader() string
	RaftState() string
	Version() version.V
}

// clusterCalls are the /v1/cluster:{verb} calls, each run on the leader.
type clusterCalls interface {
	Join(ctx context.Context, req cluster.JoinRequest) (raftstore.Node, error)
	Leave(ctx context.Context, req cluster.LeaveRequest) error
	Reconcile(ctx context.Context) error
	ProposeCommand(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error)
	Heartbeat(ctx context.Context, hb cluster.Heartbeat) (cluster.View, error)
	SelfCheck(ctx context.Context, req cluster.SelfCheckRequest) (cluster.HealthReport, error)
	forwardedWriter // join and leave report what they wrote (reportApplied)
}

func newClusterAPI(c *core, cfg Config, audit hclog.Logger, nv nodeViews, pr previewRules) *clusterAPI {
	return &clusterAPI{core: c, nodeViews: nv, previewRules: pr, gens: cfg.Generations, cluster: cfg.Cluster,
		audit: audit, parts: cfg.Parts, records: cfg.Records, rollbacker: cfg.Rollback, snapshots: cfg.Snapshots}
}
