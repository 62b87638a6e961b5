package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// oneCIDRRules is a policy of n rules, each denying one /24.
func oneCIDRRules(n int) *policy.Policy {
	p := &policy.Policy{Name: "fw", DefaultAction: policy.ActionAllow, OnError: policy.OnErrorDeny}
	for i := range n {
		p.Rules = append(p.Rules, policy.Rule{Name: fmt.Sprintf("r%05d", i), Priority: int64(i), Action: policy.ActionDeny,
			Match: fmt.Sprintf("inIpRange(request.source_ip, '10.%d.%d.0/24')", i>>8&255, i&255)})
	}
	return p
}

// indexBytes is the heap the rule index of a policy holds: the compiled
// policy with and without its index, measured.
func indexBytes(t *testing.T, p *policy.Policy) int64 {
	t.Helper()
	heap := func() int64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	cp, err := Compile(p, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	before := heap()
	cp.index = nil
	after := heap()
	runtime.KeepAlive(cp)
	return before - after
}

// The rule index grows linearly with the rules: it held a bitset as wide
// as the rules per range (n² bits), so 5,000 one-CIDR rules took 100 times
// the memory of 500 rather than 10 times.
func TestRuleIndexMemoryIsLinear(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("compiles 5,500 rules")
	}
	small, large := indexBytes(t, oneCIDRRules(500)), indexBytes(t, oneCIDRRules(5000))
	list := strings.Repeat("", 0)
	for i := range 5000 {
		list += fmt.Sprintf("10.%d.%d.0/24\n", i>>8&255, i&255)
	}
	t.Logf("rule index: 500 one-CIDR rules %d B, 5,000 rules %d B (x%.1f); a 5,000-entry list: %d B of text",
		small, large, float64(large)/float64(max(small, 1)), len(list))
	if large > 20*max(small, 1) {
		t.Fatalf("index of 5,000 rules is %d bytes, %.0f times that of 500 (%d): not linear", large, float64(large)/float64(small), small)
	}
}
