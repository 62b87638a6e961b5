package preview_test

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

// EnvRulesBench enables TestPreviewRuleOverhead, which prints (never
// asserts) live decision latency and node CPU per request with no rules in
// preview and with 10, interleaved over rounds in one run:
//
//	RECONCILER_PREVIEW_RULES_BENCH=1 go test -count=1 -run TestPreviewRuleOverhead -v -timeout 20m ./test/preview/
//
// RECONCILER_PREVIEW_BENCH_N, _ROUNDS, _RATE and _PIN apply as to
// TestPreviewOverhead.
const EnvRulesBench = "RECONCILER_PREVIEW_RULES_BENCH"

// benchPreviewRules is how many rules in preview the measured policy has.
const benchPreviewRules = 10

// previewRulesPolicy is benchPolicy(-1) with n more rules in preview,
// evaluated first if enforced: rule i would deny the paths of rule 10*i,
// half of which live allows.
func previewRulesPolicy(n int) string {
	var b strings.Builder
	b.WriteString(benchPolicy(-1))
	for i := range n {
		fmt.Fprintf(&b, "\n[[rules]]\nname = \"preview%02d\"\npriority = 0\naction = \"deny\"\nmatch = '%s'\npreview = true\n",
			i, benchMatch(10*i))
	}
	return b.String()
}

// TestPreviewRuleOverhead measures what rules in preview cost live
// decisions on one real node: the same open loop as TestPreviewOverhead
// against the live policy without and with benchPreviewRules rules in
// preview, the policy switched by a commit to main between steps.
func TestPreviewRuleOverhead(t *testing.T) {
	if os.Getenv(EnvRulesBench) == "" {
		t.Skip("set " + EnvRulesBench + "=1 to measure")
	}
	opts := benchOptionsFromEnv(t)
	harness.Binary(t)
	pin := pinLoadGenerator(t, opts.pin)
	fmt.Printf("mode: %s\nmachine: %d CPUs; load average at start: %s\n", pin.mode, runtime.NumCPU(), loadAverage())
	srv := gittest.NewServer(t, gittest.Options{})
	srv.InitRepo("policies", map[string]string{"bench/policy.toml": benchPolicy(-1)})
	work := srv.Clone(srv.RepoPath("policies"))
	b := startBenchNode(t, srv.RepoPath("policies"), pin, opts.queue)
	rate := opts.rate
	if rate <= 0 {
		rate = b.calibrate(targetBusy)
	}
	sw := &ruleSwitch{b: b, srv: srv, work: work, current: 0}
	names := []string{"none", "none again", "10 rules"}
	counts := map[string]int{"none": 0, "none again": 0, "10 rules": benchPreviewRules}
	steps := map[string][]stepResult{}
	fmt.Printf("open loop: %.0f req/s, %d requests per step (after %d warm-up)\n", rate, opts.n, warmRequests)
	for r := range opts.rounds {
		fmt.Printf("round %d/%d, load average %s\n", r+1, opts.rounds, loadAverage())
		for j := range names {
			name := names[(j+r)%len(names)]
			sw.to(counts[name])
			warm := openLoop(b.load, warmRequests, rate)
			cpu := cpuTime(b.pid)
			open := openLoop(b.load, opts.n, rate)
			s := stepResult{active: counts[name], openCPU: us(cpuTime(b.pid)-cpu) / float64(opts.n),
				p50: harness.Quantile(open.lat, 0.5), p99: harness.Quantile(open.lat, 0.99), lat: open.lat}
			if warm.failed+open.failed > 0 {
				t.Errorf("%s: %d requests failed", name, warm.failed+open.failed)
			}
			steps[name] = append(steps[name], s)
			fmt.Printf("  %-10s p50=%4.0fµs p99=%5.0fµs cpu=%4.1fµs/req\n", name, us(s.p50), us(s.p99), s.openCPU)
			if counts[name] > 0 {
				sw.checkCounted(t, uint64(warmRequests+opts.n))
			}
		}
	}
	fmt.Printf("medians over %d rounds; ratios are per round, to the mean of that round's two 'none' steps:\n", opts.rounds)
	for _, name := range names {
		var p99r, cpur []float64
		for i, s := range steps[name] {
			base0, base1 := steps["none"][i], steps["none again"][i]
			p99r = append(p99r, float64(s.p99)/((float64(base0.p99)+float64(base1.p99))/2))
			cpur = append(cpur, s.openCPU/((base0.openCPU+base1.openCPU)/2))
		}
		fmt.Printf("  %-10s p50=%4.0fµs p99=%5.0fµs cpu=%4.1fµs/req  p99 ratio %.2f  cpu ratio %.2f\n", name,
			medianOf(steps[name], func(s stepResult) float64 { return us(s.p50) }),
			medianOf(steps[name], func(s stepResult) float64 { return us(s.p99) }),
			medianOf(steps[name], func(s stepResult) float64 { return s.openCPU }), median(p99r), median(cpur))
	}
	fmt.Printf("load average at end: %s\n", loadAverage())
}

// ruleSwitch commits the policy with a number of rules in preview and
// waits until the node serves it.
type ruleSwitch struct {
	b       *benchNode
	srv     *gittest.Server
	work    string
	current int
}

// benchPolicyAnswer is what the switch reads of the bench policy.
type benchPolicyAnswer struct {
	Generation   uint64 `json:"generation"`
	PreviewRules []struct {
		Stats *struct {
			Evaluated uint64 `json:"evaluated"`
			Dropped   uint64 `json:"dropped"`
		} `json:"stats"`
	} `json:"previewRules"`
}

func (s *ruleSwitch) read() benchPolicyAnswer {
	var p benchPolicyAnswer
	client.Fetch(s.b.t, http.MethodGet, s.b.node.Base()+"/v1/policies/bench", "", &p)
	return p
}

func (s *ruleSwitch) to(n int) {
	if n == s.current {
		return
	}
	t := s.b.t
	before := s.read().Generation
	s.srv.Commit(s.work, map[string]string{"bench/policy.toml": previewRulesPolicy(n)}, fmt.Sprintf("%d rules in preview", n))
	s.srv.Push(s.work, "main")
	client.Fetch(t, http.MethodPost, s.b.node.Base()+"/v1/cluster:reconcile", "{}", nil)
	harness.WaitFor(t, 60*time.Second, "the policy served", func() error {
		if p := s.read(); p.Generation <= before || len(p.PreviewRules) != n {
			return fmt.Errorf("generation %d with %d rules in preview", p.Generation, len(p.PreviewRules))
		}
		return nil
	})
	s.current = n
	time.Sleep(600 * time.Millisecond) // the runtime installs them within its 200ms poll
}

// checkCounted fails t unless the first rule in preview evaluated or
// dropped each of the sent requests: its counts start when it enters
// preview, with this step. It reads once the heartbeat has carried them.
func (s *ruleSwitch) checkCounted(t *testing.T, sent uint64) {
	harness.WaitFor(t, settleTimeout, "counts of the rules in preview", func() error {
		p := s.read()
		if len(p.PreviewRules) == 0 || p.PreviewRules[0].Stats == nil {
			return fmt.Errorf("no stats yet")
		}
		if got := p.PreviewRules[0].Stats.Evaluated + p.PreviewRules[0].Stats.Dropped; got != sent {
			return fmt.Errorf("preview00 evaluated+dropped %d of %d sent", got, sent)
		}
		return nil
	})
}
