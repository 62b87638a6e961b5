package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Paths of the health check: the admin endpoint, and the internal one the
// leader calls on each node in scope.
const (
	PathHealthCheck = "/v1/nodes:healthCheck"
	PathSelfCheck   = "/v1/cluster:selfCheck"
)

// Health check results (ONAP's healthy field, plus what the leader saw).
const (
	Healthy     = "HEALTHY"
	NotHealthy  = "NOT_HEALTHY"
	Unreachable = "UNREACHABLE"
)

// DefaultHealthDeadline bounds a whole health check; a node that has not
// answered by then is reported unreachable.
const DefaultHealthDeadline = 3 * time.Second

// HealthCheckRequest is the body of POST /v1/nodes:healthCheck: the same
// scope as a changeState (name, group, or group and subgroup), no state.
type HealthCheckRequest struct {
	Group    string `json:"group,omitempty"`
	Subgroup string `json:"subgroup,omitempty"`
	Name     string `json:"name,omitempty"`
}

// SelfCheckRequest is what the leader asks each node: check yourself, and
// count raft as caught up once you applied LeaderIndex.
type SelfCheckRequest struct {
	LeaderIndex uint64 `json:"leaderIndex"`
}

// HealthReport is one node's answer: HEALTHY or NOT_HEALTHY with the
// reasons, or UNREACHABLE with why the leader could not ask it.
type HealthReport struct {
	ID      string   `json:"id"`
	Healthy string   `json:"healthy"`
	Reasons []string `json:"reasons"`
}

// HealthCheckResponse answers a health check, one report per node in
// scope, sorted by id.
type HealthCheckResponse struct {
	Nodes []HealthReport `json:"nodes"`
}

// SelfChecker checks this node (generation, raft, disk, preview queue, and
// the git source on the leader); the node provides it.
type SelfChecker func(ctx context.Context, leaderIndex uint64) HealthReport

// stateReader is what the health checks need of the store.
type stateReader interface {
	State() *raftstore.State
}

// healthChecks fans a health check out, from the leader, to the nodes in
// scope, and this node's own check runs locally.
type healthChecks struct {
	self      string
	store     stateReader
	selfCheck SelfChecker
	fwd       *forwarder
	peerTLS   bool
}

// HealthCheck asks every node in scope, through the leader, to check
// itself, in parallel within DefaultHealthDeadline.
func (c *Cluster) HealthCheck(ctx context.Context, req HealthCheckRequest) (HealthCheckResponse, error) {
	scope := ChangeStateRequest{State: raftstore.NodeActive, Group: req.Group, Subgroup: req.Subgroup, Name: req.Name}
	if err := scope.Validate(); err != nil {
		return HealthCheckResponse{}, err
	}
	var res HealthCheckResponse
	err := c.fwd.viaLeader(ctx, PathHealthCheck, req, &res, func() error {
		ids, err := scope.inScope(c.store.State())
		if err != nil {
			return err
		}
		res = c.health.checkNodes(ctx, ids)
		return nil
	})
	return res, err
}

// checkNodes asks each node (itself locally) and waits for every answer or
// the deadline.
func (hc *healthChecks) checkNodes(ctx context.Context, ids []string) HealthCheckResponse {
	ctx, cancel := context.WithTimeout(ctx, DefaultHealthDeadline)
	defer cancel()
	index := hc.store.State().LastIndex
	res := HealthCheckResponse{Nodes: make([]HealthReport, len(ids))}
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Nodes[i] = hc.checkNode(ctx, id, index)
			res.Nodes[i].ID = id
		}()
	}
	wg.Wait()
	return res
}

func (hc *healthChecks) checkNode(ctx context.Context, id string, index uint64) HealthReport {
	if id == hc.self {
		if hc.selfCheck == nil {
			return HealthReport{Healthy: NotHealthy, Reasons: []string{"this node has no health check"}}
		}
		return hc.selfCheck(ctx, index)
	}
	addr, err := hc.selfCheckAddr(id)
	if err != nil {
		return HealthReport{Healthy: Unreachable, Reasons: []string{err.Error()}}
	}
	body, err := json.Marshal(SelfCheckRequest{LeaderIndex: index})
	if err != nil {
		return HealthReport{Healthy: Unreachable, Reasons: []string{err.Error()}}
	}
	var r HealthReport
	// The leader asks on its own authority (its certificate with [tls],
	// else the node token), never with the admin's credential.
	if _, _, err := hc.fwd.post(withoutCredential(ctx), addr, true, PathSelfCheck, body, &r); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", DefaultHealthDeadline)
		}
		return HealthReport{Healthy: Unreachable, Reasons: []string{err.Error()}}
	}
	if r.Healthy != Healthy && r.Healthy != NotHealthy {
		return HealthReport{Healthy: Unreachable, Reasons: []string{"the node answered no health result"}}
	}
	return r
}

// selfCheckAddr is where the leader asks node id for its health: its
// node-to-node port with [tls] (its raft address, where the leader's
// certificate is verified), else its registered HTTP address.
func (hc *healthChecks) selfCheckAddr(id string) (string, error) {
	n, ok := hc.store.State().Nodes[id]
	addr := n.HTTPAddr
	if hc.peerTLS {
		addr = n.RaftAddr
	}
	if !ok || addr == "" {
		return "", errors.New("no address registered")
	}
	return addr, nil
}

// SelfCheck runs this node's own check (the internal endpoint the leader
// calls).
func (c *Cluster) SelfCheck(ctx context.Context, req SelfCheckRequest) (HealthReport, error) {
	if c.cfg.SelfCheck == nil {
		return HealthReport{}, fmt.Errorf("%w: this node has no health check", ErrBadRequest)
	}
	r := c.cfg.SelfCheck(ctx, req.LeaderIndex)
	r.ID = c.cfg.NodeID
	return r, nil
}
