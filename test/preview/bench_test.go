package preview_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

// EnvBench enables TestPreviewOverhead, which prints (never asserts) live
// decision latency and throughput with 0, 1, 5 and 10 ACTIVE experiments:
//
//	RECONCILER_PREVIEW_BENCH=1 go test -count=1 -run TestPreviewOverhead -v -timeout 20m ./test/preview/
const EnvBench = "RECONCILER_PREVIEW_BENCH"

// Optional knobs of TestPreviewOverhead.
const (
	envBenchQueue  = "RECONCILER_PREVIEW_BENCH_QUEUE"  // queue_size of the measured node (default 4096)
	envBenchRate   = "RECONCILER_PREVIEW_BENCH_RATE"   // open-loop requests/s (default: calibrated)
	envBenchN      = "RECONCILER_PREVIEW_BENCH_N"      // open-loop requests per step (default 20000)
	envBenchRounds = "RECONCILER_PREVIEW_BENCH_ROUNDS" // rounds of the main table (default 5)
	envBenchPin    = "RECONCILER_PREVIEW_BENCH_PIN"    // "0": never pin with taskset
	// envBenchActive lists the ACTIVE counts of the main table (default
	// "0,0,1,5,10"; a count given twice is an A/A control).
	envBenchActive = "RECONCILER_PREVIEW_BENCH_ACTIVE"
	// envBenchClosed "0" leaves out the closed-loop (throughput) steps and
	// the overload node, so that many rounds of latency fit in minutes.
	envBenchClosed = "RECONCILER_PREVIEW_BENCH_CLOSED"
)

const (
	benchExperiments = 10  // created once; 0, 1, 5 or 10 of them ACTIVE per step
	benchTinyQueue   = 16  // queue_size of the overload node
	targetBusy       = 0.3 // node CPU share the open-loop rate aims at with no experiments
)

// benchOptions are the knobs, read once.
type benchOptions struct {
	queue, n, rounds int
	rate             float64
	pin, closed      bool
	active           []int
}

func benchOptionsFromEnv(t *testing.T) benchOptions {
	t.Helper()
	num := func(name string, def float64) float64 {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("%s=%q: want a positive number", name, v)
		}
		return f
	}
	active := []int{0, 0, 1, 5, 10}
	if v := os.Getenv(envBenchActive); v != "" {
		active = nil
		for _, f := range strings.Split(v, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 0 || k > benchExperiments {
				t.Fatalf("%s=%q: want a list of counts from 0 to %d", envBenchActive, v, benchExperiments)
			}
			active = append(active, k)
		}
	}
	return benchOptions{queue: int(num(envBenchQueue, 4096)), n: int(num(envBenchN, 20_000)),
		rounds: int(num(envBenchRounds, 5)), rate: num(envBenchRate, -1), pin: os.Getenv(envBenchPin) != "0",
		closed: os.Getenv(envBenchClosed) != "0", active: active}
}

// TestPreviewOverhead measures what ACTIVE experiments cost live decisions
// on one real node. Latency is an open-loop load at a fixed rate well below
// capacity, timed from each request's scheduled send time (no coordinated
// omission); the configurations are interleaved over rounds in rotated
// order, so slow drift of the machine hits all of them alike, and compared
// as ratios within a round. Throughput is a closed-loop step per
// configuration. A second node with a tiny queue shows drops counted while
// live answers are unaffected. Nothing here asserts a time: machines are
// noisy. A failed request, or stats that do not account for every request
// (ACTIVE experiments evaluate or drop each one, SUSPENDED ones see none),
// is an error.
func TestPreviewOverhead(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skip("set " + EnvBench + "=1 to measure")
	}
	opts := benchOptionsFromEnv(t)
	harness.Binary(t) // build before pinning this process to one CPU
	pin := pinLoadGenerator(t, opts.pin)
	fmt.Printf("mode: %s\nmachine: %d CPUs; load average at start: %s\n", pin.mode, runtime.NumCPU(), loadAverage())
	srv := gittest.NewServer(t, gittest.Options{})
	srv.InitRepo("policies", map[string]string{"bench/policy.toml": benchPolicy(-1)})
	url := srv.RepoPath("policies")

	rate := opts.rate
	t.Run("main", func(t *testing.T) {
		b := startBenchNode(t, url, pin, opts.queue)
		if rate <= 0 {
			rate = b.calibrate(targetBusy)
		}
		b.createExperiments(benchExperiments)
		fmt.Printf("open loop: %.0f req/s, %d requests per step (after %d warm-up); closed loop: %d workers for %v; queue_size=%d\n",
			rate, opts.n, warmRequests, closedWorkers, closedFor, opts.queue)
		res := runRounds(b, configs(opts.active...), opts.rounds, rate, opts.n, opts.closed)
		printSummary(fmt.Sprintf("queue_size=%d, median over %d rounds", opts.queue, opts.rounds), res)
	})
	if t.Failed() || rate <= 0 || !opts.closed {
		return
	}
	t.Run("overload", func(t *testing.T) {
		b := startBenchNode(t, url, pin, benchTinyQueue)
		b.createExperiments(benchExperiments)
		rounds := max(3, opts.rounds/2)
		fmt.Printf("overload node: queue_size=%d, same rates\n", benchTinyQueue)
		res := runRounds(b, configs(0, 0, 10), rounds, rate, opts.n, true)
		printSummary(fmt.Sprintf("queue_size=%d, median over %d rounds", benchTinyQueue, rounds), res)
	})
	fmt.Printf("load average at end: %s\n", loadAverage())
}

// loadAverage is the first three fields of /proc/loadavg ("?" elsewhere).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// benchPolicy has 100 rules; variant v changes the action of rule v so
// each experiment differs from live.
func benchPolicy(variant int) string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n")
	for i := range 100 {
		fmt.Fprintf(&b, "\n[[rules]]\nname = \"r%03d\"\npriority = %d\naction = %q\nmatch = '%s'\n",
			i, i+1, benchAction(i, variant), benchMatch(i))
	}
	return b.String()
}

// rulesJSON is benchPolicy(variant)'s rules as JSON.
func rulesJSON(variant int) string {
	var parts []string
	for i := range 100 {
		parts = append(parts, fmt.Sprintf(`{"name":"r%03d","priority":%d,"action":%q,"match":%s}`,
			i, i+1, benchAction(i, variant), jsonString(benchMatch(i))))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func benchAction(rule, variant int) string {
	if (rule%2 == 0) != (rule == variant) {
		return "allow"
	}
	return "deny"
}

func benchMatch(rule int) string {
	return fmt.Sprintf(`request.path.startsWith("/svc%03d/") && request.method == "GET"`, rule)
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
