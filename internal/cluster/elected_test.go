package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// electedStore is a node being elected: at the first look raft names it
// leader but it does not lead yet; from the second look on it leads.
type electedStore struct {
	*fakeStore
	mu    sync.Mutex
	looks int
}

func (s *electedStore) Leader() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.looks++
	if s.looks == 2 {
		s.fakeStore.mu.Lock()
		s.fakeStore.leading = true
		s.fakeStore.mu.Unlock()
	}
	return "F", ""
}

// A node that wins the election while it forwards a request of its own
// (its raft names it leader before it leads) does the request itself as
// soon as it leads, instead of retrying the forward until its deadline:
// a join sent to the first node while it was being elected waited the
// whole forward timeout (5 s by default) and then failed.
func TestForwardRunsLocallyOnceThisNodeLeads(t *testing.T) {
	store := &electedStore{fakeStore: newFakeStore(false, "")}
	triggers := &triggerCount{}
	c, err := cluster.New(cluster.Config{NodeID: "F", Store: store, Reconciler: triggers,
		ForwardTimeout: time.Hour, Logger: testlog.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // the test's own bound, not a measurement
	defer cancel()
	if err := c.Reconcile(ctx); err != nil || triggers.count() != 1 {
		t.Fatalf("reconcile on a node elected while forwarding = %v, %d triggers", err, triggers.count())
	}
}
