package node

import (
	"strconv"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/version"
)

// supportedPolicyKinds are the policy kinds this build's engine serves
// (ONAP's supported policy types): CEL rule policies in TOML.
var supportedPolicyKinds = []string{"reconciler.policy/cel"}

// decisionStats is what the status needs of the API: the decisions it
// answered.
type decisionStats interface {
	DecisionStats() (ok, failed uint64)
}

// statusReporter makes this node's PDP_STATUS for its heartbeats, from the
// parts that know each field, and counts the nodes the leader marks failed.
type statusReporter struct {
	version   string
	node      config.Node
	settings  cluster.Settings
	state     *nodeState
	healthy   *atomic.Pointer[string] // the last health check's result
	gens      *generations
	decisions decisionStats
	metrics   *nodeMetrics
}

// pdpStatus is this node's PDP_STATUS for its next heartbeat.
func (r *statusReporter) pdpStatus() cluster.NodeStatus {
	n := r.node
	s := cluster.NodeStatus{
		Version: r.version, State: r.state.NodeState(), Group: n.Group, Subgroup: n.Subgroup,
		PolicyKinds: supportedPolicyKinds, Settings: r.settings,
	}
	if h := r.healthy.Load(); h != nil {
		s.Healthy = *h
	}
	if s.Version == "" {
		s.Version = version.Current
	}
	if cur := r.gens.Current(); cur != nil {
		s.Generation = cur.Generation
		if cur.Bundle != nil {
			s.Etags = cur.Bundle.Etags()
		}
	}
	ok, failed := r.decisions.DecisionStats()
	dok, dfailed := r.metrics.deployOK.Load(), r.metrics.deployFailed.Load()
	s.Statistics = cluster.Statistics{
		PolicyDeployCount: dok + dfailed, PolicyDeploySuccess: dok, PolicyDeployFail: dfailed,
		PolicyExecutedCount: ok + failed, PolicyExecutedSuccess: ok, PolicyExecutedFail: failed,
	}
	return s
}

// nodeFailed counts a node the leader marked failed.
func (r *statusReporter) nodeFailed(string) { r.metrics.failures.Inc() }

// nodeSettings are this node's settings that change decisions: nodes that
// differ from the leader join PASSIVE (cluster/consistency.go). The build
// version is not one: a rolling upgrade runs two versions on purpose, and
// the loader's etag check catches a build that compiles differently.
func nodeSettings(cfg *config.Config) cluster.Settings {
	o := engine.DefaultOptions()
	return cluster.Settings{
		"policy.merge_default":      string(cfg.Policy.MergeDefault),
		"engine.max_rule_cost":      strconv.FormatUint(o.MaxRuleCost, 10),
		"engine.runtime_cost_limit": strconv.FormatUint(o.RuntimeCostLimit, 10),
		"api.path_escaped_slashes":  cfg.API.PathEscapedSlashes,
	}
}
