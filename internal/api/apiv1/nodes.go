package apiv1

import (
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Node is a node as GET /v1/nodes/{id} and /v1/status show it: the
// registry entry plus what the leader last heard from it.
type Node struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	Group    string `json:"group"`
	Subgroup string `json:"subgroup"`
	State    string `json:"state"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// Reachable: the leader heard a heartbeat recently, so it waits for
	// this node's Ready before activating a generation.
	Reachable     bool      `json:"reachable"`
	LastHeartbeat time.Time `json:"lastHeartbeat,omitzero"`
	// Generation is the generation the node answers decisions from, as
	// its last heartbeat said (the answering node's own: right now).
	Generation uint64    `json:"generation"`
	JoinTime   time.Time `json:"joinTime"`
	// Status is the node's last PDP_STATUS as the leader received it.
	Status *NodeStatus `json:"status,omitempty"`
	// HeldReasons say why a PASSIVE node is held: how its settings differ
	// from the leader's, a group or subgroup the cluster does not know.
	HeldReasons []string `json:"heldReasons,omitempty"`
	// LoadFailures are the active or staged generations, newer than the
	// one it serves, that the node reported it cannot load, with its
	// errors: the leader promotes without it and it is out of rotation
	// until it loads a later generation.
	LoadFailures []LoadFailure `json:"loadFailures,omitempty"`
	// AppliedIndex is the raft index the node had applied at its last
	// heartbeat (the answering node's own: right now).
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	// NotFollowing says why the leader promotes without a node that
	// heartbeats but has not applied the log for longer than the follow
	// timeout: it is out of rotation until it catches up.
	NotFollowing string `json:"notFollowing,omitempty"`
}

// NodeList answers GET /v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// LoadFailure is a generation a node reported it cannot load.
type LoadFailure struct {
	Generation uint64   `json:"generation"`
	Errors     []string `json:"errors"`
}

// NodeStatus is a node's PDP_STATUS (ONAP) as its last heartbeat said.
type NodeStatus struct {
	Version string `json:"version"`
	// State is the state the node acts on, or TERMINATED in the last
	// heartbeat of a node that stops.
	State string `json:"state"`
	// Healthy is the result of the node's last health check (HEALTHY,
	// NOT_HEALTHY), "" before one ran.
	Healthy     string            `json:"healthy,omitempty"`
	Group       string            `json:"group"`
	Subgroup    string            `json:"subgroup"`
	PolicyKinds []string          `json:"supportedPolicyKinds"`
	Generation  uint64            `json:"generation"`
	Etags       map[string]string `json:"etags,omitempty"`
	Statistics  Statistics        `json:"statistics"`
	// Settings are the node's decision-affecting settings, which name how
	// a node held PASSIVE differs from the leader.
	Settings map[string]string `json:"settings,omitempty"`
}

// Statistics are ONAP's PDP statistics: a node's since it started, or
// their sum over the cluster.
type Statistics struct {
	PolicyDeployCount     uint64 `json:"policyDeployCount"`
	PolicyDeploySuccess   uint64 `json:"policyDeploySuccessCount"`
	PolicyDeployFail      uint64 `json:"policyDeployFailCount"`
	PolicyExecutedCount   uint64 `json:"policyExecutedCount"`
	PolicyExecutedSuccess uint64 `json:"policyExecutedSuccessCount"`
	PolicyExecutedFail    uint64 `json:"policyExecutedFailCount"`
}

// FromNode maps a registry entry and the leader's last heartbeat from it
// (hb's zero value when none arrived). What only the answering node knows
// (leader, held reasons, its own generation, load failures) its caller
// adds.
func FromNode(n raftstore.Node, hb cluster.NodeView) Node {
	res := Node{
		ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Group: n.Group, Subgroup: n.Subgroup,
		State: string(n.State), Voter: n.Voter,
		Reachable: hb.Reachable, LastHeartbeat: hb.LastHeartbeat, Generation: hb.Generation, JoinTime: n.JoinTime,
		Status: FromNodeStatus(hb.Status), AppliedIndex: hb.AppliedIndex,
	}
	if hb.NotFollowing != nil {
		res.NotFollowing = hb.NotFollowing.Reason()
	}
	if hb.Status != nil && hb.Status.State == raftstore.NodeTerminated {
		res.State = string(raftstore.NodeTerminated) // it said so in its last heartbeat
	}
	return res
}

// FromNodeStatus maps a heartbeat's PDP_STATUS; nil stays nil.
func FromNodeStatus(s *cluster.NodeStatus) *NodeStatus {
	if s == nil {
		return nil
	}
	return &NodeStatus{
		Version: s.Version, State: string(s.State), Healthy: s.Healthy, Group: s.Group, Subgroup: s.Subgroup,
		PolicyKinds: s.PolicyKinds, Generation: s.Generation, Etags: s.Etags,
		Statistics: FromStatistics(s.Statistics), Settings: s.Settings,
	}
}

// FromStatistics maps a node's (or the summed) statistics.
func FromStatistics(s cluster.Statistics) Statistics {
	return Statistics{
		PolicyDeployCount: s.PolicyDeployCount, PolicyDeploySuccess: s.PolicyDeploySuccess,
		PolicyDeployFail: s.PolicyDeployFail, PolicyExecutedCount: s.PolicyExecutedCount,
		PolicyExecutedSuccess: s.PolicyExecutedSuccess, PolicyExecutedFail: s.PolicyExecutedFail,
	}
}

// StateChangeList answers POST /v1/nodes:changeState: the nodes it
// changed, and the nodes in scope that already were in the state.
type StateChangeList struct {
	Changed   []StateChange `json:"changed"`
	Unchanged []string      `json:"unchanged"`
}

// StateChange is one node's state change.
type StateChange struct {
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
}

// FromChangeState maps the cluster's answer to a state change.
func FromChangeState(r cluster.ChangeStateResponse) StateChangeList {
	out := StateChangeList{Unchanged: r.Unchanged}
	if r.Changed != nil {
		out.Changed = make([]StateChange, 0, len(r.Changed))
	}
	for _, c := range r.Changed {
		out.Changed = append(out.Changed, StateChange{ID: c.ID, From: string(c.From), To: string(c.To)})
	}
	return out
}

// HealthReportList answers POST /v1/nodes:healthCheck, one report per
// node in scope, sorted by id.
type HealthReportList struct {
	Nodes []HealthReport `json:"nodes"`
}

// HealthReport is one node's health: HEALTHY, NOT_HEALTHY (with
// reasons) or UNREACHABLE.
type HealthReport struct {
	ID      string   `json:"id"`
	Healthy string   `json:"healthy"`
	Reasons []string `json:"reasons"`
}

// FromHealthCheck maps the cluster's answer to a health check.
func FromHealthCheck(r cluster.HealthCheckResponse) HealthReportList {
	var out HealthReportList
	if r.Nodes != nil {
		out.Nodes = make([]HealthReport, 0, len(r.Nodes))
	}
	for _, n := range r.Nodes {
		out.Nodes = append(out.Nodes, HealthReport{ID: n.ID, Healthy: n.Healthy, Reasons: n.Reasons})
	}
	return out
}
