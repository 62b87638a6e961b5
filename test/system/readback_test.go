package system

import (
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestChangeStateReadsBackOnTheFollowerWithTLS: with mutual TLS between
// the nodes and an admin token, a follower that forwarded a changeState
// trusts the leader's answer (its certificate names the leader) and
// answers once it shows the new state, every round.
func TestChangeStateReadsBackOnTheFollowerWithTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	t.Parallel()
	c := StartTLSClusterWithToken(t, 3, peerAuthToken)
	leader := c.Leader(harness.LeaderTimeout)
	via := c.Others(leader)[0]
	c.CheckChangeStateReadsBack(via, c.Others(leader, via)[0], 30)
}
