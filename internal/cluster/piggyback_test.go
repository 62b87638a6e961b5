package cluster_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
)

// countPiggyback sends its node's number and merges by listing "id=n" pairs
// in id order, so the test can see exactly which payloads the leader used.
type countPiggyback struct {
	n      int
	mu     sync.Mutex
	merged string
}

var _ cluster.Piggyback = (*countPiggyback)(nil)

func (c *countPiggyback) Outgoing() json.RawMessage {
	b, _ := json.Marshal(c.n)
	return b
}

func (c *countPiggyback) Merge(payloads map[string]json.RawMessage) json.RawMessage {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(payloads)) {
		parts = append(parts, id+"="+string(payloads[id]))
	}
	b, _ := json.Marshal(strings.Join(parts, ","))
	return b
}

func (c *countPiggyback) Adopt(merged json.RawMessage) {
	var s string
	_ = json.Unmarshal(merged, &s)
	c.mu.Lock()
	c.merged = s
	c.mu.Unlock()
}

func (c *countPiggyback) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.merged
}

// TestPiggybackRidesOnHeartbeats: both nodes' payloads reach the leader's
// merge through the ordinary heartbeats, and both nodes adopt the merge.
func TestPiggybackRidesOnHeartbeats(t *testing.T) {
	p := newPair(t, "", "")
	p.leader.ResetLeadership()
	lpb, fpb := &countPiggyback{n: 1}, &countPiggyback{n: 2}
	p.leader.SetPiggyback(lpb)
	p.follower.SetPiggyback(fpb)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range []*cluster.Cluster{p.leader, p.follower} {
		wg.Add(1)
		go func() { defer wg.Done(); c.RunHeartbeats(ctx, func() uint64 { return 1 }) }()
	}
	const want = "F=2,L=1"
	deadline := time.Now().Add(5 * time.Second)
	for (lpb.get() != want || fpb.get() != want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if lpb.get() != want || fpb.get() != want {
		t.Errorf("merged payloads: leader %q, follower %q, want %q on both", lpb.get(), fpb.get(), want)
	}
	if got := string(p.leader.View().Payload); got != `"`+want+`"` {
		t.Errorf("leader's view payload = %s", got)
	}
}
