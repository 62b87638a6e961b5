package node

import (
	"strconv"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/version"
)

// supportedPolicyKinds are the policy kinds this build's engine serves
// (ONAP's supported policy types): CEL rule policies in TOML.
var supportedPolicyKinds = []string{"reconciler.policy/cel"}

// pdpStatus is this node's PDP_STATUS for its next heartbeat.
func (m *Main) pdpStatus() cluster.NodeStatus {
	n := m.Config.Node
	s := cluster.NodeStatus{
		Version: m.Version, State: m.state.NodeState(), Group: n.Group, Subgroup: n.Subgroup,
		PolicyKinds: supportedPolicyKinds, Settings: m.settings(),
	}
	if h := m.healthy.Load(); h != nil {
		s.Healthy = *h
	}
	if s.Version == "" {
		s.Version = version.Current
	}
	if cur := m.gens.Current(); cur != nil {
		s.Generation = cur.Generation
		if cur.Bundle != nil {
			s.Etags = cur.Bundle.Etags()
		}
	}
	ok, failed := m.api.DecisionStats()
	dok, dfailed := m.loader.metrics.deployOK.Load(), m.loader.metrics.deployFailed.Load()
	s.Statistics = cluster.Statistics{
		PolicyDeployCount: dok + dfailed, PolicyDeploySuccess: dok, PolicyDeployFail: dfailed,
		PolicyExecutedCount: ok + failed, PolicyExecutedSuccess: ok, PolicyExecutedFail: failed,
	}
	return s
}

// nodeFailed counts a node the leader marked failed.
func (m *Main) nodeFailed(string) { m.loader.metrics.failures.Inc() }

// settings are this node's settings that change decisions: nodes that
// differ from the leader join PASSIVE (cluster/consistency.go). The build
// version is not one: a rolling upgrade runs two versions on purpose, and
// the loader's etag check catches a build that compiles differently.
func (m *Main) settings() cluster.Settings {
	o := engine.DefaultOptions()
	return cluster.Settings{
		"policy.merge_default":      string(m.Config.Policy.MergeDefault),
		"engine.max_rule_cost":      strconv.FormatUint(o.MaxRuleCost, 10),
		"engine.runtime_cost_limit": strconv.FormatUint(o.RuntimeCostLimit, 10),
		"api.path_escaped_slashes":  m.Config.API.PathEscapedSlashes,
	}
}
