package engine

import (
	"fmt"
	"strings"

	"github.com/policyrollout/reconciler/internal/policy"
)

// TestResult is the outcome of one policy test.
type TestResult struct {
	Policy string // the policy's name
	Name   string // the test's name
	// Pos is where the test is defined, for "file:line: message" output.
	Pos    policy.Pos
	Passed bool
	Want   policy.Action
	// WantRule is the rule the test expects to decide; nil when it does not
	// care, "" for the default action.
	WantRule *string
	// Got is the decision; zero when the request itself was invalid.
	Got Decision
	// Message says what differed, or why the request was invalid; "" on
	// success.
	Message string
}

// RunTests runs the policy's own tests against its compiled form, in the
// policy's test order (by name). A test request without a time is
// evaluated at the zero time, not the clock, so results are reproducible.
func RunTests(cp *CompiledPolicy) []TestResult {
	tests := cp.src.Tests
	out := make([]TestResult, 0, len(tests))
	for i := range tests {
		out = append(out, cp.runTest(&tests[i]))
	}
	return out
}

func (cp *CompiledPolicy) runTest(t *policy.Test) TestResult {
	res := TestResult{Policy: cp.Name(), Name: t.Name, Pos: t.Pos, Want: t.Expect, WantRule: t.Rule}
	want, ok := verdictOf(t.Expect)
	if !ok {
		res.Message = fmt.Sprintf(`expect must be "allow" or "deny", not %q`, t.Expect)
		return res
	}
	req, err := RequestFromMap(t.Request)
	if err != nil {
		res.Message = err.Error()
		return res
	}
	res.Got = cp.Evaluate(req)
	res.Message = mismatch(want, t.Rule, res.Got)
	res.Passed = res.Message == ""
	return res
}

// mismatch describes how got differs from the expectation, or "".
func mismatch(want Verdict, wantRule *string, got Decision) string {
	ruleDiff := wantRule != nil && got.Rule != *wantRule
	var diffs []string
	if got.Verdict != want {
		d := fmt.Sprintf("got %s, want %s", got.Verdict, want)
		if !ruleDiff {
			d += " (decided by " + ruleLabel(got.Rule) + ")"
		}
		diffs = append(diffs, d)
	}
	if ruleDiff {
		diffs = append(diffs, fmt.Sprintf("decided by %s, want %s", ruleLabel(got.Rule), ruleLabel(*wantRule)))
	}
	if len(diffs) == 0 {
		return ""
	}
	msg := strings.Join(diffs, "; ")
	if got.Error != "" {
		msg += "; match error: " + got.Error
	}
	return msg
}

func ruleLabel(rule string) string {
	if rule == "" {
		return "the default action"
	}
	return fmt.Sprintf("rule %q", rule)
}
