package api

import (
	"context"
	"net/http"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/version"
)

// Cluster is what the API needs from the cluster layer: the replicated
// state to show, and the writes that go through the leader (each method
// runs locally on the leader and forwards otherwise).
type Cluster interface {
	NodeID() string
	State() *raftstore.State
	Leader() string
	RaftState() string
	View() cluster.View
	Join(ctx context.Context, req cluster.JoinRequest) (raftstore.Node, error)
	Leave(ctx context.Context, req cluster.LeaveRequest) error
	Reconcile(ctx context.Context) error
	ProposeCommand(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error)
	Heartbeat(ctx context.Context, hb cluster.Heartbeat) (cluster.View, error)
	// OnLeader and ForwardRead are the one way to reach the leader
	// (cluster.Cluster.OnLeader): run here when leading, else forward once.
	OnLeader(ctx context.Context, wait time.Duration, local func(context.Context) error, call cluster.Call) (*cluster.Answer, error)
	ForwardRead(ctx context.Context, call cluster.Call) (cluster.Answer, bool, error)
	// ForwardedWriteDone is the leader's last step of a write another
	// node forwarded (reportApplied).
	ForwardedWriteDone(since uint64) uint64
	ChangeState(ctx context.Context, req cluster.ChangeStateRequest) (cluster.ChangeStateResponse, error)
	HealthCheck(ctx context.Context, req cluster.HealthCheckRequest) (cluster.HealthCheckResponse, error)
	SelfCheck(ctx context.Context, req cluster.SelfCheckRequest) (cluster.HealthReport, error)
	HeldReasons(n raftstore.Node, v cluster.View) []string
	// Version is the cluster version: the lowest release among the members.
	Version() version.V
	// IsMember reports whether node id is a member (registered or in the
	// raft configuration): the node port gives others only a join.
	IsMember(id string) bool
}

var _ Cluster = (*cluster.Cluster)(nil)

const clusterPrefix = "/v1/cluster:"

// routeCluster handles POST /v1/cluster:{verb}. Every verb changes the
// cluster: reconcile needs a writer, the others an admin.
func (s *clusterAPI) routeCluster(w http.ResponseWriter, r *http.Request, verb string) {
	handlers := map[string]func(context.Context, http.ResponseWriter, *http.Request){
		"join":      s.join,
		"leave":     s.leave,
		"reconcile": s.reconcile,
		"propose":   s.propose,
		"heartbeat": s.heartbeat,
		"selfCheck": s.selfCheck,
	}
	h, ok := handlers[verb]
	if !ok || s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", r.URL.Path))
		return
	}
	if !s.allow(w, r, http.MethodPost) {
		return
	}
	if (verb == "propose" || verb == "heartbeat") && !s.fromPeer(w, r) {
		return
	}
	if !s.admit(w, r) {
		return
	}
	ctx := r.Context()
	ctx = s.forwardedContext(ctx, r)
	ctx = cluster.WithCredential(ctx, r.Header.Get("Authorization"))
	h(ctx, w, r)
}

func (s *clusterAPI) join(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req cluster.JoinRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	since := s.cluster.State().LastIndex
	n, err := s.cluster.Join(ctx, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reportApplied(ctx, w, s.cluster, since)
	s.writeValue(w, r, s.nodeResource(n, s.cluster.State(), s.cluster.View()))
}

func (s *clusterAPI) leave(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req cluster.LeaveRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	since := s.cluster.State().LastIndex
	if err := s.cluster.Leave(ctx, req); err != nil {
		s.fail(w, r, err)
		return
	}
	reportApplied(ctx, w, s.cluster, since)
	writeJSON(w, http.StatusOK, []byte("{}\n"))
}

// reconcile answers 202: the leader loop reads the source soon; the
// outcome shows in GET /v1/status and /v1/generations.
func (s *clusterAPI) reconcile(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.cluster.Reconcile(ctx); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, []byte("{}\n"))
}

// propose is internal: a node's report forwarded to the leader.
func (s *clusterAPI) propose(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var cmd raftstore.Command
	if err := s.decodeJSON(w, r, &cmd); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.cluster.ProposeCommand(ctx, cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, cluster.ProposeResponse{Index: res.Index})
}

// heartbeat is internal: a node tells the leader it is alive.
func (s *clusterAPI) heartbeat(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var hb cluster.Heartbeat
	if err := s.decodeJSON(w, r, &hb); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.cluster.Heartbeat(ctx, hb)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, v)
}

// selfCheck is internal: the leader asks this node to check itself.
func (s *clusterAPI) selfCheck(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req cluster.SelfCheckRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.cluster.SelfCheck(ctx, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, res)
}
