package node

import (
	"github.com/policyrollout/reconciler/internal/cluster"
)

// supportedPolicyKinds are the policy kinds this build's engine serves
// (ONAP's supported policy types): CEL rule policies in TOML.
var supportedPolicyKinds = []string{"reconciler.policy/cel"}

// pdpStatus is this node's PDP_STATUS for its next heartbeat.
func (m *Main) pdpStatus() cluster.NodeStatus {
	n := m.Config.Node
	s := cluster.NodeStatus{
		Version: m.Version, State: m.state.NodeState(), Group: n.Group, Subgroup: n.Subgroup,
		PolicyKinds: supportedPolicyKinds,
	}
	if h := m.healthy.Load(); h != nil {
		s.Healthy = *h
	}
	if s.Version == "" {
		s.Version = "dev"
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
