package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/policy"
)

// firewallPolicy generates n rules shaped like a real firewall rule set:
// an address range, usually a method and a host, sometimes a path prefix,
// and for some a condition the index cannot use (a header or principal).
func firewallPolicy(n int, seed uint64) *policy.Policy {
	r := rand.New(rand.NewPCG(seed, 1))
	p := &policy.Policy{Name: "fw", DefaultAction: policy.ActionAllow, OnError: policy.OnErrorDeny}
	for i := range n {
		m := fwRange(r)
		if r.IntN(4) != 0 {
			m += fmt.Sprintf(" && request.method in ['%s', '%s']", pick(r, genMethods[:4]), pick(r, genMethods[:4]))
		}
		if r.IntN(3) != 0 {
			m += fmt.Sprintf(" && request.host == 'svc%d.example.com'", r.IntN(50))
		}
		if r.IntN(2) == 0 {
			m += fmt.Sprintf(" && request.path.startsWith('/api/v%d/svc%d/')", 1+r.IntN(2), r.IntN(50))
		}
		if r.IntN(5) == 0 {
			m += " && request.headers['x-tenant'] == 't1'"
		}
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("rule-%04d", i), Priority: int64(i),
			Action: pick(r, []policy.Action{policy.ActionAllow, policy.ActionDeny}), Match: m})
	}
	return p
}

func fwRange(r *rand.Rand) string {
	if r.IntN(5) == 0 {
		return fmt.Sprintf("cidr('2001:db8:%x::/48').containsIP(request.source_ip)", r.IntN(256))
	}
	cidr := fmt.Sprintf("10.%d.%d.0/%d", r.IntN(64), r.IntN(256), pick(r, []int{16, 20, 24}))
	if r.IntN(2) == 0 {
		return fmt.Sprintf("inIpRange(request.source_ip, '%s')", cidr)
	}
	return fmt.Sprintf("cidr('%s').containsIP(request.source_ip)", cidr)
}

// fwRequests are the traffic: addresses in and out of the ranges, the
// hosts and paths the rules name, and a header.
func fwRequests(k int, seed uint64) []*Request {
	r := rand.New(rand.NewPCG(seed, 2))
	out := make([]*Request, k)
	for i := range out {
		ip := fmt.Sprintf("10.%d.%d.%d", r.IntN(64), r.IntN(256), r.IntN(256))
		if r.IntN(5) == 0 {
			ip = fmt.Sprintf("2001:db8:%x::%x", r.IntN(256), r.IntN(1000))
		}
		out[i] = &Request{
			Method:   pick(r, genMethods[:4]),
			Host:     fmt.Sprintf("svc%d.example.com", r.IntN(50)),
			Path:     fmt.Sprintf("/api/v%d/svc%d/items/%d", 1+r.IntN(2), r.IntN(50), r.IntN(100)),
			SourceIP: ip,
			Headers:  PairsOf(map[string]string{"x-tenant": pick(r, []string{"t1", "t2"}), "user-agent": "bench"}),
		}
	}
	return out
}

// opaquePolicy has n rules the index cannot use: every one is evaluated.
func opaquePolicy(n int) *policy.Policy {
	p := &policy.Policy{Name: "opaque", DefaultAction: policy.ActionAllow, OnError: policy.OnErrorDeny}
	for i := range n {
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("rule-%04d", i), Priority: int64(i),
			Action: policy.ActionDeny,
			Match:  fmt.Sprintf("request.headers['user-agent'] == 'bot-%d' || request.principal == 'user-%d'", i, i)})
	}
	return p
}

func BenchmarkEvaluate(b *testing.B) {
	reqs := fwRequests(1024, 3)
	for _, n := range []int{10, 100, 1000} {
		cp := mustCompile(b, firewallPolicy(n, 42), DefaultOptions())
		b.Run(fmt.Sprintf("indexable-%d", n), func(b *testing.B) { benchEval(b, cp, reqs) })
	}
	cp := mustCompile(b, opaquePolicy(1000), DefaultOptions())
	b.Run("non-indexable-1000", func(b *testing.B) { benchEval(b, cp, reqs) })
	cp = mustCompile(b, firewallPolicy(100, 42), Options{DisableIndex: true})
	b.Run("indexable-100-index-disabled", func(b *testing.B) { benchEval(b, cp, reqs) })
	// Every fourth rule guards a header of its own (25 names), as WAF-like
	// policies do; requests carry one of them at most.
	p := firewallPolicy(100, 42)
	for i := 0; i < len(p.Rules); i += 4 {
		p.Rules[i].Match = fmt.Sprintf("'x-h%d' in request.headers && request.headers['x-h%d'] == 'bad'", i, i)
	}
	cp = mustCompile(b, p, DefaultOptions())
	b.Run("headers-25-names-100", func(b *testing.B) { benchEval(b, cp, reqs) })
}

func benchEval(b *testing.B, cp *CompiledPolicy, reqs []*Request) {
	b.ReportAllocs()
	matched := 0
	i := 0
	for b.Loop() {
		if cp.Evaluate(reqs[i%len(reqs)]).Rule != "" {
			matched++
		}
		i++
	}
	b.ReportMetric(float64(matched)/float64(i), "matched/op")
}

// BenchmarkCompile reports the time and retained memory of compiling a
// 1,000-rule policy: what a node holds per policy version.
func BenchmarkCompile(b *testing.B) {
	p := firewallPolicy(1000, 42)
	b.ReportAllocs()
	var kept *CompiledPolicy
	for b.Loop() {
		kept = mustCompile(b, p, DefaultOptions())
	}
	b.StopTimer()
	b.ReportMetric(float64(retained(func() any { return mustCompile(b, p, DefaultOptions()) })), "retained-bytes")
	runtime.KeepAlive(kept)
}

// retained measures the heap still in use after build, by live-heap delta.
func retained(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkEvaluateSamples decides the 2,500 requests of
// policies.example/_traffic with edge-firewall, one per iteration in turn:
// the engine's share of an :evaluate over HTTP (scripts/bench-http.sh), and
// its decoding's.
func BenchmarkEvaluateSamples(b *testing.B) {
	bundle, errs := CompileTree(exampleTreeWith(b, nil), policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		b.Fatal(errs)
	}
	cp, ok := bundle.Policy("edge-firewall")
	if !ok {
		b.Fatal("no edge-firewall")
	}
	data, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	reqs := make([]*Request, len(lines))
	for i, l := range lines {
		if reqs[i], err = DecodeRequest(l); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		c0, i := cpuTime(), 0
		for b.Loop() {
			if _, err := DecodeRequest(lines[i%len(lines)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(cpuTime()-c0)/float64(i), "cpu-ns/op")
	})
	b.Run("evaluate", func(b *testing.B) {
		b.ReportAllocs()
		c0, i := cpuTime(), 0
		for b.Loop() {
			cp.Evaluate(reqs[i%len(reqs)])
			i++
		}
		b.ReportMetric(float64(cpuTime()-c0)/float64(i), "cpu-ns/op")
	})
}

// cpuTime is the CPU time this process has used, user and system: on a
// machine shared with other work, CPU per operation stays what it is where
// wall time per operation does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
