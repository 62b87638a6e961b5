package preview_test

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// stepResult is one configuration measured once.
type stepResult struct {
	active         int
	p50, p99, p999 time.Duration   // open loop (see openLoop)
	lat            []time.Duration // the open loop's latencies, sorted, for pooled quantiles
	late, held     int             // open-loop sends behind schedule (see openResult)
	openCPU        float64         // node CPU µs per request over the open loop
	openBusy       float64         // node CPU seconds per second over the open loop
	genBusy        float64         // the same for this process, the load generator
	gcs            int             // node garbage collections during the open loop
	openSent       int             // warm-up included
	openDrops      uint64          // summed over the ACTIVE experiments
	rps            float64         // closed loop
	closedBusy     float64         // node CPU seconds per second over the closed loop
	closedSent     int
	closedDrops    uint64
}

// benchConfig is one configuration: how many experiments are ACTIVE.
// Two configurations with the same count are an A/A control: how far
// apart this machine puts identical measurements.
type benchConfig struct {
	name   string
	active int
}

// configs names counts; a repeated count is named "N again".
func configs(counts ...int) []benchConfig {
	var out []benchConfig
	seen := map[int]bool{}
	for _, k := range counts {
		name := fmt.Sprint(k)
		if seen[k] {
			name += " again"
		}
		seen[k] = true
		out = append(out, benchConfig{name: name, active: k})
	}
	return out
}

// roundsResult is every step of every round, by configuration name, in
// round order.
type roundsResult struct {
	configs []benchConfig
	steps   map[string][]stepResult
	closed  bool // the steps have closed-loop numbers
}

// runRounds measures every configuration once per round, rotating the
// order by one each round so no configuration always runs first or
// after the same one.
func runRounds(b *benchNode, cfgs []benchConfig, rounds int, rate float64, n int, closed bool) roundsResult {
	res := roundsResult{configs: cfgs, steps: map[string][]stepResult{}, closed: closed}
	segments := 1 // open loop, and closed loop when closed
	if closed {
		segments = 2
	}
	for r := range rounds {
		fmt.Printf("round %d/%d, load average %s\n", r+1, rounds, loadAverage())
		for j := range cfgs {
			c := cfgs[(j+r)%len(cfgs)]
			s := b.step(c.active, rate, n, closed)
			res.steps[c.name] = append(res.steps[c.name], s)
			fmt.Printf("  %-8s open: p50=%4.0fµs p99=%5.0fµs p99.9=%5.0fµs cpu=%4.1fµs/req busy %2.0f%% gen %2.0f%% gc=%d late=%d held=%d "+
				"drops=%d/%d", c.name, us(s.p50), us(s.p99), us(s.p999),
				s.openCPU, 100*s.openBusy, 100*s.genBusy, s.gcs, s.late, s.held, s.openDrops, s.openSent*s.active)
			if closed {
				fmt.Printf("  closed: %5.0f req/s busy %3.0f%% drops=%d/%d", s.rps, 100*s.closedBusy, s.closedDrops, s.closedSent*s.active)
			}
			fmt.Println()
		}
	}
	fmt.Printf("stats accounted for every request in %d of %d load segments "+
		"(each ACTIVE experiment: evaluated + dropped = sent; each SUSPENDED one: 0)\n", b.checks, segments*rounds*len(cfgs))
	return res
}

// step measures k ACTIVE experiments: warm-up and open loop, then (when
// closed) closed loop, each checked against the experiments' stats.
func (b *benchNode) step(k int, rate float64, n int, closed bool) stepResult {
	b.switchTo(k)
	s := stepResult{active: k}
	warm := openLoop(b.load, warmRequests, rate)
	cpu, gen, gcs := cpuTime(b.pid), cpuTime(os.Getpid()), b.gcCount()
	open := openLoop(b.load, n, rate)
	s.gcs = b.gcCount() - gcs
	s.openCPU = us(cpuTime(b.pid)-cpu) / float64(n)
	s.openBusy = s.openCPU * rate / 1e6
	s.genBusy = us(cpuTime(os.Getpid())-gen) / float64(n) * rate / 1e6
	if failed := warm.failed + open.failed; failed > 0 {
		b.t.Errorf("ACTIVE=%d: %d open-loop requests failed", k, failed)
	}
	s.p50, s.p99, s.p999 = harness.Quantile(open.lat, 0.50), harness.Quantile(open.lat, 0.99), harness.Quantile(open.lat, 0.999)
	s.lat = open.lat
	s.late, s.held, s.openSent = open.late, open.held, len(warm.lat)+len(open.lat)
	s.openDrops = b.settle(s.openSent)
	if !closed {
		return s
	}
	cpu = cpuTime(b.pid)
	answered, failed := closedLoop(b.load, closedWorkers, closedFor)
	s.closedBusy = (cpuTime(b.pid) - cpu).Seconds() / closedFor.Seconds()
	if failed > 0 {
		b.t.Errorf("ACTIVE=%d: %d closed-loop requests failed", k, failed)
	}
	s.rps, s.closedSent = float64(answered)/closedFor.Seconds(), answered
	s.closedDrops = b.settle(answered)
	return s
}

// printSummary prints one line per configuration: medians over rounds,
// and ratios to no experiments: each round's step over the mean of the
// same round's 0-ACTIVE steps, whose own rows show how far identical
// steps land apart (the noise); the median over rounds, and its range
// for p99 (between the first and third quartiles). "pooled" is the p99 of all rounds' latencies together over
// that of all 0-ACTIVE steps. Neither is robust to the machine: one
// stall of a few milliseconds (a busy neighbour on a shared VM) queues
// thousands of open-loop requests behind it and moves the p99 of the
// step it hits, and of the pool, by 2x or more. The A/A rows ("0 again")
// show how far that reaches in a run; a ratio is only meaningful beside
// them, and the CPU and throughput columns are the steadier signal.
func printSummary(title string, res roundsResult) {
	var base [][]stepResult
	var baseLat []time.Duration
	for _, c := range res.configs {
		if c.active == 0 {
			base = append(base, res.steps[c.name])
			baseLat = append(baseLat, pooled(res.steps[c.name])...)
		}
	}
	slices.Sort(baseLat)
	fmt.Printf("\n%s\n", title)
	fmt.Printf("%-8s %7s %7s %8s %-18s %6s %6s %8s %6s  %-14s", "ACTIVE", "p50 µs", "p99 µs",
		"p99.9 µs", "p99/0 [q1-q3]", "pooled", "p50/0", "cpu µs/r", "cpu/0", "open drops")
	if res.closed {
		fmt.Printf(" %9s %5s %6s  %s", "closed/s", "busy", "r/s /0", "closed drops")
	}
	fmt.Println()
	for _, c := range res.configs {
		st := res.steps[c.name]
		p99r := ratios(st, base, func(s stepResult) float64 { return us(s.p99) })
		all := pooled(st)
		slices.Sort(all)
		fmt.Printf("%-8s %7.0f %7.0f %8.0f %-18s %6.2f %6.2f %8.1f %6.2f  %-14s", c.name,
			medianOf(st, func(s stepResult) float64 { return us(s.p50) }),
			medianOf(st, func(s stepResult) float64 { return us(s.p99) }),
			medianOf(st, func(s stepResult) float64 { return us(s.p999) }),
			fmt.Sprintf("%.2f [%.2f-%.2f]", median(p99r), quartile(p99r, 1), quartile(p99r, 3)),
			us(harness.Quantile(all, 0.99))/us(harness.Quantile(baseLat, 0.99)),
			median(ratios(st, base, func(s stepResult) float64 { return us(s.p50) })),
			medianOf(st, func(s stepResult) float64 { return s.openCPU }),
			median(ratios(st, base, func(s stepResult) float64 { return s.openCPU })),
			dropShare(st, func(s stepResult) (uint64, int) { return s.openDrops, s.openSent * s.active }))
		if res.closed {
			fmt.Printf(" %9.0f %4.0f%% %6.2f  %s",
				medianOf(st, func(s stepResult) float64 { return s.rps }),
				100*medianOf(st, func(s stepResult) float64 { return s.closedBusy }),
				median(ratios(st, base, func(s stepResult) float64 { return s.rps })),
				dropShare(st, func(s stepResult) (uint64, int) { return s.closedDrops, s.closedSent * s.active }))
		}
		fmt.Println()
	}
	fmt.Println()
}

// pooled is the open-loop latencies of every step, unsorted.
func pooled(st []stepResult) []time.Duration {
	var out []time.Duration
	for _, s := range st {
		out = append(out, s.lat...)
	}
	return out
}

// ratios is f of each round's step over the mean of f of the same
// round's base steps.
func ratios(st []stepResult, base [][]stepResult, f func(stepResult) float64) []float64 {
	out := make([]float64, len(st))
	for i := range st {
		var sum float64
		for _, b := range base {
			sum += f(b[i])
		}
		out[i] = f(st[i]) / (sum / float64(len(base)))
	}
	return out
}

// medianOf is the median of f over the steps.
func medianOf(st []stepResult, f func(stepResult) float64) float64 {
	xs := make([]float64, len(st))
	for i, s := range st {
		xs[i] = f(s)
	}
	return median(xs)
}

// dropShare is the drops over all rounds, and their share of the
// evaluations asked for when known.
func dropShare(st []stepResult, f func(stepResult) (uint64, int)) string {
	var drops uint64
	asked := 0
	for _, s := range st {
		d, a := f(s)
		drops, asked = drops+d, asked+a
	}
	if asked <= 0 {
		return fmt.Sprint(drops)
	}
	return fmt.Sprintf("%d (%.1f%%)", drops, 100*float64(drops)/float64(asked))
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// quartile q (1 or 3) of xs, interpolated: with few rounds it stays
// inside the values, with many it says where the middle half lies.
func quartile(xs []float64, q int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := float64(q) / 4 * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
