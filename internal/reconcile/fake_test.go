package reconcile

import (
	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/leadertest"
)

// The fakes live in internal/leadertest, shared with the experiment
// service's and the GitHub worker's tests.
type (
	fakeStore    = leadertest.Store
	fakeRepo     = leadertest.Repo
	fixedMembers = leadertest.FixedMembers
)

var (
	newFakeStore = leadertest.NewStore
	newFakeRepo  = leadertest.NewRepo

	_ Source = (*fakeRepo)(nil)
)

var (
	webPolicy  = leadertest.WebPolicy
	eventually = leadertest.Eventually
	ready      = leadertest.Ready
)

// leader is the loop and its parts as the experiment service asks of the
// leader (the node wires the same in internal/node).
type leader struct {
	*Loop
	*Trees
	*Committer
	*Rollbacks
}

func leaderOf(l *Loop) leader { return leader{l, l.Trees(), l.Committer(), l.Rollbacks()} }

var _ experiments.Leader = leader{}
