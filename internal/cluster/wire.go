package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Paths of the cluster endpoints. Join, leave and reconcile are public
// (docs/api.md); propose and heartbeat are internal, used by nodes only.
const (
	PathJoin      = "/v1/cluster:join"
	PathLeave     = "/v1/cluster:leave"
	PathReconcile = "/v1/cluster:reconcile"
	PathPropose   = "/v1/cluster:propose"
	PathHeartbeat = "/v1/cluster:heartbeat"
)

// ForwardedHeader marks a request one node forwarded to the node it
// believes is the leader. The receiver executes it locally or answers
// NOT_LEADER, never forwards it again: at most one hop, no loops while two
// nodes disagree about who leads.
const ForwardedHeader = "X-Reconciler-Forwarded"

type forwardedKey struct{}

// WithForwarded marks ctx as serving a forwarded request (the API sets it
// when ForwardedHeader is present).
func WithForwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

// IsForwarded reports whether ctx serves a forwarded request.
func IsForwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}

// JoinRequest is the body of POST /v1/cluster:join: the node that wants to
// become a member and how to reach it.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	// Voter false joins as a non-voting read replica.
	Voter    bool   `json:"voter"`
	Group    string `json:"group,omitempty"`
	Subgroup string `json:"subgroup,omitempty"`
	// Settings are the node's decision-affecting settings; a node whose
	// settings differ from the leader's joins PASSIVE (consistency.go).
	Settings map[string]string `json:"settings,omitempty"`
}

// LeaveRequest is the body of POST /v1/cluster:leave.
type LeaveRequest struct {
	ID string `json:"id"`
}

// ProposeResponse answers POST /v1/cluster:propose.
type ProposeResponse struct {
	Index uint64 `json:"index"`
}

// Heartbeat is the body of POST /v1/cluster:heartbeat: a node says it is
// alive and which generation it serves. Heartbeats stay in the leader's
// memory; they never enter the raft log.
type Heartbeat struct {
	ID string `json:"id"`
	// Generation is the generation the node answers decisions from.
	Generation uint64 `json:"generation"`
	// Payload is what a Piggyback subsystem sends along (preview stats).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Status is the node's PDP_STATUS (status.go).
	Status *NodeStatus `json:"status,omitempty"`
	// AppliedIndex is the last raft index the node applied, so the leader
	// sees a node that heartbeats but does not follow the log (follow.go).
	// Nil from builds before it, which are not judged so.
	AppliedIndex *uint64 `json:"appliedIndex,omitempty"`
}

// View is the leader's picture of the cluster that is not in the raft log:
// heartbeats and the policy source. The leader answers every heartbeat with
// it, so every node can show it (at most one heartbeat interval old).
type View struct {
	// Leader is the id of the node that built the view.
	Leader string `json:"leader"`
	// Time is when the leader built it, on the leader's clock.
	Time time.Time `json:"time"`
	// Nodes holds what the leader heard from each node, by id.
	Nodes map[string]NodeView `json:"nodes"`
	// Source is the leader's last read of the policy source.
	Source SourceStatus `json:"source"`
	// Payload is the Piggyback subsystem's merge of every node's payload.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// NodeView is one node's last heartbeat as the leader received it.
type NodeView struct {
	LastHeartbeat time.Time `json:"lastHeartbeat"`
	Generation    uint64    `json:"generation"`
	// Reachable: the heartbeat is recent enough that the leader waits for
	// this node's Ready before activating a staged generation.
	Reachable bool `json:"reachable"`
	// Status is the node's last PDP_STATUS, nil before one arrived.
	Status *NodeStatus `json:"status,omitempty"`
	// AppliedIndex is the raft index the node had applied at its last
	// heartbeat (0 from an older build).
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	// NotFollowing is set while the node has gone past the follow timeout
	// without applying an entry the leader had: the leader promotes
	// without it, and it is out of rotation until it catches up.
	NotFollowing *Lag `json:"notFollowing,omitempty"`
}

// SourceStatus is what the leader last read from the policy source.
type SourceStatus struct {
	// Commit is the last revision read ("" before the first read).
	Commit string `json:"commit,omitempty"`
	// Error is why the last read failed, "" when it succeeded.
	Error string `json:"error,omitempty"`
	// Time is when the last read finished.
	Time time.Time `json:"time,omitzero"`
	// Diverged is set while the live branch's head does not descend from
	// the active generation's commit: nothing is promoted until an
	// operator accepts it (docs/git.md, "Never rewind").
	Diverged *Divergence `json:"diverged,omitempty"`
}

// Divergence is a live-branch head the leader refuses to promote.
type Divergence struct {
	Commit string    `json:"commit"`
	Active string    `json:"active"`
	Since  time.Time `json:"since"`
}

// forwardable lists the command types a node may propose through the
// leader: its own reports. Everything that decides generations (stage,
// activate, invalidate) is the leader loop's and never arrives from outside.
var forwardable = map[raftstore.CommandType]bool{
	raftstore.TypeReportReady:  true,
	raftstore.TypeReportFailed: true,
}
