package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

func mustCompile(t testing.TB, p *policy.Policy, opts Options) *CompiledPolicy {
	t.Helper()
	cp, err := Compile(p, opts)
	if err != nil {
		t.Fatalf("Compile: %v\nrules:\n%s", err, ruleDump(p))
	}
	return cp
}

// testPolicy builds a policy named "p" with the given default and on_error.
func testPolicy(deflt policy.Action, onError policy.OnError, rules ...policy.Rule) *policy.Policy {
	return &policy.Policy{Name: "p", DefaultAction: deflt, OnError: onError, Rules: rules,
		Sources: []string{"p/policy.toml"}}
}

// rule builds a rule positioned at line 10*priority of p/policy.toml.
func rule(name string, priority int64, action policy.Action, match string) policy.Rule {
	return policy.Rule{Name: name, Priority: priority, Action: action, Match: match,
		Pos: policy.Pos{File: "p/policy.toml", Line: int(10 * priority)}}
}

func ruleDump(p *policy.Policy) string {
	var b strings.Builder
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "  %s prio=%d %s: %s\n", r.Name, r.Priority, r.Action, r.Match)
	}
	return b.String()
}
