package preview_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// settleTimeout bounds the wait for the stats (sent with the cluster
// heartbeat, every 500ms) to account for a step's requests.
const settleTimeout = 60 * time.Second

// benchNode is one node under load with benchExperiments experiments of
// the policy "bench", of which the first `active` are ACTIVE.
type benchNode struct {
	t      *testing.T
	node   *harness.Node
	pid    int
	url    string  // :evaluate of bench
	load   *target // the same, for the load generator
	exps   int
	active int
	last   map[string]expCounts // the stats at the end of the last step
	checks int                  // settles whose stats accounted for every request
}

// expCounts is what the stats say about one experiment.
type expCounts struct {
	state              string
	evaluated, dropped uint64
}

// startBenchNode starts a one-node cluster following url, pins it and
// waits until it answers bench.
func startBenchNode(t *testing.T, url string, pin *pinning, queue int) *benchNode {
	t.Helper()
	c := harness.StartCluster(t, harness.ClusterOptions{
		Size: 1,
		Env:  pin.env(),
		Configure: func(cfg *harness.Config) {
			cfg.GitURL, cfg.Poll = url, "@every 1h"
			cfg.Extra = fmt.Sprintf("[preview]\nauto_start = true\nqueue_size = %d", queue)
		},
	})
	n := c.Nodes[0]
	b := &benchNode{t: t, node: n, pid: n.Pid(), url: n.Base() + "/v1/policies/bench:evaluate"}
	pin.pinNode(t, b.pid)
	var err error
	if b.load, err = newTarget(b.url); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 30*time.Second, "bench live", func() error {
		code, body, err := do(http.MethodPost, b.url, benchBodies[0])
		if err == nil && code != 200 {
			err = fmt.Errorf("%d %s", code, body)
		}
		return err
	})
	return b
}

// calibrate picks the open-loop rate that keeps the node busy for about
// targetBusy of its CPU with no experiments. A node answers a decision
// with about half the CPU at saturation that it needs at a low rate (it
// batches network wake-ups), so a share of the closed-loop throughput
// would load it much more than that share: the rate comes from the CPU
// per request of a short open loop at a tenth of that throughput instead.
func (b *benchNode) calibrate(targetBusy float64) float64 {
	closedLoop(b.load, closedWorkers, time.Second) // warm up
	cpu := cpuTime(b.pid)
	answered, failed := closedLoop(b.load, closedWorkers, closedFor)
	busy := (cpuTime(b.pid) - cpu).Seconds() / closedFor.Seconds()
	rps := float64(answered) / closedFor.Seconds()
	probe := rps / 10
	cpu = cpuTime(b.pid)
	open := openLoop(b.load, int(2*probe), probe)
	perReq := (cpuTime(b.pid) - cpu).Seconds() / (2 * probe)
	if failed+open.failed > 0 || perReq <= 0 {
		b.t.Fatalf("calibration: %d requests failed, %.1fµs of node CPU per request", failed+open.failed, 1e6*perReq)
	}
	rate := min(targetBusy/perReq, 0.4*rps)
	fmt.Printf("calibration, no experiments: closed loop (%d workers) %.0f req/s with the node %.0f%% busy; "+
		"open loop at %.0f req/s: %.1fµs node CPU per request -> %.0f req/s for %.0f%% node CPU (%.0f%% of closed-loop throughput)\n",
		closedWorkers, rps, 100*busy, probe, 1e6*perReq, rate, 100*rate*perReq, 100*rate/rps)
	return rate
}

// createExperiments creates n experiments (auto-started), reports the
// node's memory before and after, and suspends them all.
func (b *benchNode) createExperiments(n int) {
	t := b.t
	before := rssKiB(b.pid)
	for i := range n {
		body := `{"policy":{"name":"bench","default_action":"allow","rules":` + rulesJSON(i) + `}}`
		b.operation(fmt.Sprintf("/v1/policies/bench/experiments?experimentId=e%d", i), body)
	}
	b.exps, b.active = n, n
	time.Sleep(time.Second) // installed, replayed and garbage collected, roughly
	after := rssKiB(b.pid)
	fmt.Printf("node RSS: %d KiB before, %d KiB with %d ACTIVE experiments: ~%d KiB per experiment (RSS, rough; "+
		"see BenchmarkMemoryPerExperiment in internal/preview)\n", before, after, n, (after-before)/max(n, 1))
	b.switchTo(0)
	b.last = b.snapshot()
	if len(b.last) != n {
		t.Fatalf("listed %d experiments, want %d", len(b.last), n)
	}
}

// operation POSTs body to path on the node and fails t unless the
// answer is a done Operation without error.
func (b *benchNode) operation(path, body string) {
	b.t.Helper()
	var op harness.Operation
	if code := client.Fetch(b.t, http.MethodPost, b.node.Base()+path, body, &op); code != 200 || !op.Done || op.Error != nil {
		b.t.Fatalf("POST %s: %d %+v", path, code, op)
	}
}

// switchTo makes experiments e0..e(k-1) ACTIVE and the others SUSPENDED.
func (b *benchNode) switchTo(k int) {
	if k == b.active {
		return
	}
	for i := range b.exps {
		if on, was := i < k, i < b.active; on != was {
			verb := map[bool]string{true: ":startPreview", false: ":stopPreview"}[on]
			b.operation(fmt.Sprintf("/v1/policies/bench/experiments/e%d%s", i, verb), "{}")
		}
	}
	b.active = k
	time.Sleep(600 * time.Millisecond) // the runtime installs them within its 200ms poll
}

// snapshot reads every experiment's state and counts, by id.
func (b *benchNode) snapshot() map[string]expCounts {
	var list struct {
		Experiments []harness.Experiment `json:"experiments"`
	}
	client.Fetch(b.t, http.MethodGet, b.node.Base()+"/v1/policies/bench/experiments?pageSize=100", "", &list)
	out := map[string]expCounts{}
	for _, e := range list.Experiments {
		c := expCounts{state: e.PreviewMetadata.State}
		if e.Stats != nil {
			c.evaluated, c.dropped = e.Stats.Evaluated, e.Stats.Dropped
		}
		out[e.Name[strings.LastIndex(e.Name, "/")+1:]] = c
	}
	return out
}

// settle waits until the stats show that every ACTIVE experiment
// evaluated or dropped each of the sent requests since the last settle,
// and that no SUSPENDED one saw any; it returns the drops summed over
// the ACTIVE experiments. Waiting also lets the queue drain, so the next
// step starts with idle workers.
func (b *benchNode) settle(sent int) (dropped uint64) {
	b.t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		now := b.snapshot()
		dropped, pending, bad := b.account(now, uint64(sent))
		if bad != "" || (pending != "" && time.Now().After(deadline)) {
			b.t.Errorf("after %d requests with %d ACTIVE: %s%s", sent, b.active, bad, pending)
		}
		if bad != "" || pending == "" || time.Now().After(deadline) {
			if bad == "" && pending == "" {
				b.checks++
			}
			b.last = now
			return dropped
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// account compares now with b.last: pending says which ACTIVE
// experiments have not accounted for sent yet, bad what can never become
// right (wrong state, counts past sent, a SUSPENDED experiment counting).
func (b *benchNode) account(now map[string]expCounts, sent uint64) (dropped uint64, pending, bad string) {
	for i := range b.exps {
		id := fmt.Sprintf("e%d", i)
		c, was := now[id], b.last[id]
		ev, dr := c.evaluated-was.evaluated, c.dropped-was.dropped
		want := map[bool]string{true: "ACTIVE", false: "SUSPENDED"}[i < b.active]
		switch {
		case c.state != want:
			bad += fmt.Sprintf("%s is %s, want %s; ", id, c.state, want)
		case want == "SUSPENDED" && ev+dr != 0:
			bad += fmt.Sprintf("SUSPENDED %s evaluated %d, dropped %d; ", id, ev, dr)
		case want == "ACTIVE" && ev+dr > sent:
			bad += fmt.Sprintf("%s evaluated %d + dropped %d > %d sent; ", id, ev, dr, sent)
		case want == "ACTIVE" && ev+dr < sent:
			pending += fmt.Sprintf("%s evaluated %d + dropped %d of %d; ", id, ev, dr, sent)
		}
		if want == "ACTIVE" {
			dropped += dr
		}
	}
	return dropped, pending, bad
}

// gcCount is how many garbage collections the node has finished, from
// its /metrics (-1 when it cannot tell).
func (b *benchNode) gcCount() int {
	code, body, err := do(http.MethodGet, b.node.Base()+"/metrics", "")
	if err != nil || code != 200 {
		return -1
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "go_gc_duration_seconds_count "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return n
			}
		}
	}
	return -1
}
