package system

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// The TestBench* tests measure; they print numbers and never assert on
// them. A failed decision or a broken invariant still fails them. Run:
//
//	RECONCILER_SYSTEM_BENCH=1 go test -count=1 -v -run '^TestBench' -timeout 30m ./test/system/
func startBench(t *testing.T, n int) *Cluster {
	t.Helper()
	if os.Getenv(EnvBench) == "" {
		t.Skipf("measurement: runs only with %s=1 (make bench)", EnvBench)
	}
	return startSystem(t, n)
}

// report prints a measurement to the test log and to stdout, so that it
// shows without -v too.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	fmt.Printf("BENCH %s: %s\n", t.Name(), msg)
}

// TestBenchPromotionLatency promotes 50 trees one after the other on a
// 3-node cluster under light load and reports, per promotion, trigger →
// staged (createTime), staged → activated (activateTime) and trigger →
// answered from on all three nodes (seen by polling every node).
func TestBenchPromotionLatency(t *testing.T) {
	benchPromotion(t, startBench(t, 3))
}

// TestBenchPromotionLatencyTLS is TestBenchPromotionLatency with mutual
// TLS between the nodes ([tls]): raft, forwarding, heartbeats and reports
// over the TLS node port.
func TestBenchPromotionLatencyTLS(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skipf("measurement: runs only with %s=1 (make bench)", EnvBench)
	}
	benchPromotion(t, StartTLSCluster(t, 3))
}

func benchPromotion(t *testing.T, c *Cluster) {
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	var toStage, toActive, toAll []time.Duration
	for k := 1; k <= 50; k++ {
		start := time.Now()
		c.Promote(k)
		gen, all := waitServingTimed(t, c, k, start)
		toAll = append(toAll, all)
		g, err := c.generation(gen)
		if err != nil {
			t.Errorf("GET /v1/generations/%d: %v", gen, err)
			continue
		}
		if created, active := g.CreatedAt(), g.ActivatedAt(); !created.IsZero() && !active.IsZero() {
			toStage = append(toStage, created.Sub(start))
			toActive = append(toActive, active.Sub(created))
		}
	}
	report(t, "trigger→staged      %s", harness.Percentiles(toStage))
	report(t, "staged→activated    %s", harness.Percentiles(toActive))
	report(t, "trigger→all 3 nodes %s", harness.Percentiles(toAll))
	finish(t, c, load, chk)
}

// waitServingTimed polls every node every 5 ms until all answer from tree
// k, and returns the generation and how long after start the last one did.
func waitServingTimed(t *testing.T, c *Cluster, k int, start time.Time) (uint64, time.Duration) {
	t.Helper()
	deadline := start.Add(harness.PromoteTimeout)
	for time.Now().Before(deadline) {
		if gen, err := c.ServingTree(k, c.Nodes); err == nil {
			return gen, time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.WaitServing(k, c.Nodes, time.Second), time.Since(start) // fails the test
}

// TestBenchDecisionThroughput sends decisions as fast as 4 workers per
// node can for 10 s without promotions, then 10 s with a promotion every
// second, and reports both rates and their ratio. A failed decision during
// a swap fails the test.
func TestBenchDecisionThroughput(t *testing.T) {
	c := startBench(t, 3)
	chk := NewChecker()
	opts := LoadOptions{WorkersPerNode: 4, MaxRequests: 50_000_000, MaxDuration: 10 * time.Second}
	quiet := measureLoad(t, c, chk, opts, nil)
	k := 0
	busy := measureLoad(t, c, chk, opts, func() { k++; c.Promote(k) })
	report(t, "decisions/s without promotions %.0f, with a promotion every second %.0f (ratio %.2f, %d promotions)",
		quiet, busy, busy/quiet, k)
	_, _, failed := chk.Counts()
	report(t, "failed decisions on healthy nodes: %v", failed)
	chk.Verify(t, c)
}

// measureLoad runs one load for opts.MaxDuration, calling every (when not
// nil) once a second, and returns the decisions per second.
func measureLoad(t *testing.T, c *Cluster, chk *Checker, opts LoadOptions, every func()) float64 {
	t.Helper()
	start := time.Now()
	load := StartLoad(t, c, chk, opts)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < opts.MaxDuration {
		<-tick.C
		if every != nil && time.Since(start) < opts.MaxDuration-time.Second {
			every()
		}
	}
	n := load.Stop()
	return float64(n) / time.Since(start).Seconds()
}

// TestBenchLeaderFailover kills the leader with SIGKILL three times and
// reports how long until the survivors agree on a new leader, until a
// promotion completes on them, and whether the followers kept answering
// decisions meanwhile (a failure there fails the test).
func TestBenchLeaderFailover(t *testing.T) {
	c := startBench(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	var toLeader, toPromotion []time.Duration
	for round := 1; round <= 3; round++ {
		leader := c.Leader(harness.LeaderTimeout)
		survivors := c.Others(leader)
		okBefore, _, failedBefore := chk.Counts()
		c.Kill(leader)
		killed := time.Now()
		c.Leader(harness.LeaderTimeout, survivors...)
		toLeader = append(toLeader, time.Since(killed))
		c.Promote(round, survivors...)
		c.WaitServing(round, survivors, harness.PromoteTimeout)
		toPromotion = append(toPromotion, time.Since(killed))
		ok, _, failedAfter := chk.Counts()
		for _, p := range survivors {
			report(t, "round %d: %s answered %d decisions and failed %d between the kill and the promotion served",
				round, p.ID, ok[p.ID]-okBefore[p.ID], failedAfter[p.ID]-failedBefore[p.ID])
		}
		c.Restart(leader)
		c.WaitServing(round, c.Nodes, harness.PromoteTimeout)
	}
	report(t, "kill→new leader       %v", toLeader)
	report(t, "kill→promotion served %v", toPromotion)
	finish(t, c, load, chk)
}
