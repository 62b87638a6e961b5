package reconcile

import "github.com/policyrollout/reconciler/internal/leadertest"

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
