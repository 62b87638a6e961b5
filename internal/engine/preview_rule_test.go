package engine

import (
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// A rule in preview is compiled (a broken one fails validation) but never
// decides, whether its match is true or not.
func TestPreviewRuleNeverDecides(t *testing.T) {
	t.Parallel()
	deny := rule("deny-admin", 1, policy.ActionDeny, "request.path.startsWith('/admin')")
	deny.Preview = true
	p := testPolicy(policy.ActionAllow, policy.OnErrorDeny, deny, rule("deny-x", 2, policy.ActionDeny, "request.path == '/x'"))
	cp := mustCompile(t, p, Options{})
	d := cp.Evaluate(&Request{Method: "GET", Path: "/admin/users"})
	if d.Verdict != Allow || d.Rule != "" {
		t.Fatalf("decision = %+v, want the default allow", d)
	}
	if d := cp.Evaluate(&Request{Method: "GET", Path: "/x"}); d.Verdict != Deny || d.Rule != "deny-x" {
		t.Fatalf("decision = %+v, want deny-x", d)
	}
	broken := rule("broken", 3, policy.ActionDeny, "request.pth == '/'")
	broken.Preview = true
	p.Rules = append(p.Rules, broken)
	if _, err := Compile(p, Options{}); err == nil {
		t.Fatal("a preview rule that does not compile passed")
	}
}
