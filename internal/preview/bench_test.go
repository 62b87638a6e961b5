package preview_test

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// hundredRules is a 100-rule policy of the forms real policies use (IP
// ranges, path prefixes, method and host, guarded headers). variant >= 0
// makes an experiment: one rule flips its action and one rule is added.
func hundredRules(variant int) *policy.Policy {
	p := &policy.Policy{Name: "bench", DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny}
	for i := range 100 {
		r := policy.Rule{Name: fmt.Sprintf("r%03d", i), Priority: int64(100 + i), Action: policy.ActionDeny}
		switch i % 4 {
		case 0:
			r.Match = fmt.Sprintf("inIpRange(request.source_ip, '10.%d.0.0/16')", i)
		case 1:
			r.Match = fmt.Sprintf("request.path.startsWith('/p%d/')", i)
		case 2:
			r.Action, r.Match = policy.ActionAllow, fmt.Sprintf("request.method == 'POST' && request.host == 'h%d.example.com'", i)
		case 3:
			r.Match = fmt.Sprintf("'x-h%d' in request.headers && request.headers['x-h%d'] == 'bad'", i, i)
		}
		if i == variant%100 && variant >= 0 {
			r.Action = map[policy.Action]policy.Action{policy.ActionAllow: policy.ActionDeny, policy.ActionDeny: policy.ActionAllow}[r.Action]
		}
		p.Rules = append(p.Rules, r)
	}
	if variant >= 0 {
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("extra-%d", variant), Priority: 50, Action: policy.ActionDeny,
			Match: fmt.Sprintf("request.path == '/v%d'", variant)})
	}
	return p
}

func benchRequests(n int) []*engine.Request {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([]*engine.Request, n)
	for i := range out {
		k := rng.IntN(100)
		out[i] = &engine.Request{
			Method: []string{"GET", "POST"}[rng.IntN(2)], Scheme: "https", Host: fmt.Sprintf("h%d.example.com", k),
			Path: fmt.Sprintf("/p%d/x", rng.IntN(120)), SourceIP: fmt.Sprintf("10.%d.1.2", rng.IntN(200)),
			Headers: engine.PairsOf(map[string]string{fmt.Sprintf("x-h%d", k): []string{"ok", "bad"}[rng.IntN(2)], "authorization": "Bearer t"}),
			Time:    time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC),
		}
	}
	return out
}

// latency is a log-linear histogram (16 sub-buckets per power of two,
// within 6%), cheap enough to record every iteration.
type latency struct{ counts [64 * 16]uint64 }

func (h *latency) record(d time.Duration) {
	v := uint64(max(d, 1))
	e := bits.Len64(v) - 1
	sub := uint64(0)
	if e >= 4 {
		sub = (v >> (e - 4)) & 15
	} else {
		sub = (v << (4 - e)) & 15
	}
	h.counts[e*16+int(sub)]++
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *latency) quantile(q float64) float64 {
	var total uint64
	for _, c := range h.counts {
		total += c
	}
	want, seen := uint64(q*float64(total)), uint64(0)
	for i, c := range h.counts {
		if seen += c; seen > want {
			e, sub := i/16, i%16
			return float64(uint64(1)<<e) * (1 + float64(sub+1)/16)
		}
	}
	return 0
}

func shadowWith(b *testing.B, active int, cfg preview.Config) (*preview.Shadow, *engine.CompiledPolicy) {
	b.Helper()
	live := compile(b, hundredRules(-1))
	return shadowOver(b, live, active, cfg), live
}

// shadowOver starts a Shadow over live with active ACTIVE experiments,
// compiled beside live as the node compiles them.
func shadowOver(b *testing.B, live *engine.CompiledPolicy, active int, cfg preview.Config) *preview.Shadow {
	return shadowBeside(b, live, live, active, cfg)
}

// shadowBeside is shadowOver with the experiments compiled beside base
// (nil: alone).
func shadowBeside(b *testing.B, live, base *engine.CompiledPolicy, active int, cfg preview.Config) *preview.Shadow {
	b.Helper()
	cfg.Log = io.Discard
	sh := preview.New(cfg)
	var compiled []preview.CompiledExperiment
	comp := preview.NewCompiler(engine.Options{})
	for i := range active {
		e, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/bench", ExperimentID: fmt.Sprintf("e%d", i),
			Policy: hundredRules(i * 7)}, preview.Settings{}, t0)
		if err != nil {
			b.Fatal(err)
		}
		e, _ = preview.StartPreview(e, t0)
		ce, err := comp.Compile(e, base)
		if err != nil {
			b.Fatal(err)
		}
		compiled = append(compiled, ce)
	}
	sh.SetExperiments(map[string]*engine.CompiledPolicy{"bench": live}, compiled)
	if err := sh.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sh.Stop(context.Background()) })
	return sh
}

// BenchmarkOffer measures the live path, evaluate + Offer, with 0 to 10
// ACTIVE experiments on a 100-rule policy: throughput (ns/op) and, from a
// per-iteration histogram, p50/p99 of evaluate+Offer and p99/max of Offer
// alone. The target is p99 within 1.1x of active=0. "paused" keeps the
// workers asleep, so every Offer takes the drop path (counting a drop per
// experiment) and the numbers show the live path alone, without the
// workers' CPU use beside it.
func BenchmarkOffer(b *testing.B) {
	for _, mode := range []string{"running", "paused"} {
		for _, n := range []int{0, 1, 5, 10} {
			b.Run(fmt.Sprintf("workers=%s/active=%d", mode, n), func(b *testing.B) {
				cfg := preview.Config{}
				if mode == "paused" {
					cfg.PollInterval = time.Hour
				}
				benchOffer(b, n, cfg)
			})
		}
	}
}

func benchOffer(b *testing.B, n int, cfg preview.Config) {
	sh, live := shadowWith(b, n, cfg)
	reqs := benchRequests(1024)
	var total, offer latency
	var worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		r := reqs[i&1023]
		start := time.Now()
		d := live.Evaluate(r)
		mid := time.Now()
		sh.Offer("bench", d, r)
		end := time.Now()
		total.record(end.Sub(start))
		offer.record(end.Sub(mid))
		worst = max(worst, end.Sub(mid))
	}
	b.StopTimer()
	st := sh.Status()
	b.ReportMetric(total.quantile(0.50), "p50-ns")
	b.ReportMetric(total.quantile(0.99), "p99-ns")
	b.ReportMetric(offer.quantile(0.99), "offer-p99-ns")
	b.ReportMetric(float64(worst.Nanoseconds()), "offer-max-ns")
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
}

// BenchmarkOfferP99Ratio alternates chunks of evaluate+Offer between a
// shadow with no experiments and one with N ACTIVE experiments (waiting,
// untimed, for each queue to drain between chunks), so both see the same
// machine load, and reports the ratio of their p99s: the target is 1.1.
func BenchmarkOfferP99Ratio(b *testing.B) {
	for _, n := range []int{1, 5, 10} {
		b.Run(fmt.Sprintf("active=%d", n), func(b *testing.B) {
			live := compile(b, hundredRules(-1))
			base, with := shadowOver(b, live, 0, preview.Config{}), shadowOver(b, live, n, preview.Config{})
			reqs := benchRequests(1024)
			var hb, hw latency
			const chunk = 20_000
			b.ResetTimer()
			for i := 0; i < b.N; {
				sh, h := base, &hb
				if (i/chunk)%2 == 1 {
					sh, h = with, &hw
				}
				for end := min(b.N, i+chunk); i < end; i++ {
					r := reqs[i&1023]
					start := time.Now()
					sh.Offer("bench", live.Evaluate(r), r)
					h.record(time.Since(start))
				}
				b.StopTimer()
				drain(sh)
				b.StartTimer()
			}
			b.ReportMetric(hb.quantile(0.99), "base-p99-ns")
			b.ReportMetric(hw.quantile(0.99), "p99-ns")
			b.ReportMetric(hw.quantile(0.99)/max(hb.quantile(0.99), 1), "p99-ratio")
			b.ReportMetric(hw.quantile(0.50)/max(hb.quantile(0.50), 1), "p50-ratio")
		})
	}
}

// drain waits until the workers have emptied the queue.
// processCPU is the CPU time this process has used (user and system).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func drain(sh *preview.Shadow) {
	for sh.Status().Queued > 0 {
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkOfferOverload offers from every CPU as fast as possible, with
// a small queue and 10 experiments: Offer stays cheap and the excess is
// dropped and counted.
func BenchmarkOfferOverload(b *testing.B) {
	sh, live := shadowWith(b, 10, preview.Config{QueueSize: 256})
	reqs := benchRequests(1024)
	decisions := make([]engine.Decision, len(reqs))
	for i, r := range reqs {
		decisions[i] = live.Evaluate(r)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			sh.Offer("bench", decisions[i&1023], reqs[i&1023])
			i++
		}
	})
	b.StopTimer()
	st := sh.Status()
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
	b.ReportMetric(float64(st.Processed)/float64(b.N), "processed/op")
}

// BenchmarkMemoryPerExperiment reports the heap held per ACTIVE
// experiment: its compiled 100-rule program, and its stats once full
// (transitions and 20 redacted samples).
func BenchmarkMemoryPerExperiment(b *testing.B) {
	const n = 10
	reqs := benchRequests(2000)
	live := compile(b, hundredRules(-1))
	for _, c := range []struct {
		name string
		base *engine.CompiledPolicy
	}{{"beside-live", live}, {"alone", nil}} {
		b.Run(c.name, func(b *testing.B) {
			var program, stats float64
			cfg := preview.Config{QueueSize: len(reqs), RecordRequests: -1}
			for range b.N {
				// What a shadow holds without experiments (its queue,
				// 2000 items here) is not theirs: subtract it.
				before := heap()
				empty := shadowBeside(b, live, c.base, 0, cfg)
				mid := heap()
				bare := mid - before
				sh := shadowBeside(b, live, c.base, n, cfg)
				compiled := heap()
				runtime.KeepAlive(empty)
				for _, r := range reqs {
					sh.Offer("bench", live.Evaluate(r), r)
				}
				sh.Stop(context.Background())
				filled := heap()
				program += float64(compiled-mid-bare) / n
				stats += float64(filled-compiled) / n
				runtime.KeepAlive(sh)
			}
			b.ReportMetric(program/float64(b.N), "program-bytes/experiment")
			b.ReportMetric(stats/float64(b.N), "stats-bytes/experiment")
		})
	}
}

func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkShadowWork is the workers' side: the CPU time shadow
// evaluation of one live request costs with 0 (recording only), 1, 5 and 10 ACTIVE
// experiments (evaluations, stats, sampled log lines), requests offered
// in chunks the queue holds and timed until processed. It is the CPU that
// preview takes from live requests on a node with few CPUs: cpu-ns/op, the
// process's CPU time (offering included); ns/op also counts the idle
// workers' poll interval.
func BenchmarkShadowWork(b *testing.B) {
	for _, n := range []int{0, 1, 5, 10} {
		b.Run(fmt.Sprintf("active=%d", n), func(b *testing.B) {
			sh, live := shadowWith(b, n, preview.Config{Workers: 1})
			reqs := benchRequests(1024)
			decisions := make([]engine.Decision, len(reqs))
			for i, r := range reqs {
				decisions[i] = live.Evaluate(r)
			}
			const chunk = 1000
			cpu := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; {
				for end := min(b.N, i+chunk); i < end; i++ {
					sh.Offer("bench", decisions[i&1023], reqs[i&1023])
				}
				drain(sh)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			st := sh.Status()
			b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
			b.ReportMetric(float64(n), "experiments")
		})
	}
}
