package github

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/mdcheck"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// bigSummaries are n changed policies of pull request 9, each with
// transitions and samples (a writer's pull request shows them).
func bigSummaries(n int) []preview.Summary {
	out := make([]preview.Summary, n)
	for i := range out {
		name := fmt.Sprintf("p%03d", i)
		s := preview.Summary{Policy: "policies/" + name, Experiment: "policies/" + name + "/experiments/pr-9",
			Kind: preview.KindUpdate, ExperimentEtag: fmt.Sprintf("e%d", i), LiveEtag: fmt.Sprintf("l%d", i), State: preview.Active}
		s.Stats.Counts = preview.Counts{Evaluated: 100, Unchanged: 90, AllowToDeny: 10}
		for k := range 3 {
			rule := fmt.Sprintf("</details><img src=x onerror=alert(%d)>|`", k)
			s.Stats.Transitions = append(s.Stats.Transitions, preview.Transition{ExperimentRule: rule,
				LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: 5})
			s.Stats.Samples = append(s.Stats.Samples, preview.Sample{LiveDecision: engine.Allow, ExperimentDecision: engine.Deny,
				ExperimentRule: rule, Request: map[string]any{"path": strings.Repeat("/x", 100), "v": "```</details>"}})
		}
		out[i] = s
	}
	return out
}

// TestCommentBodyFitsGitHub: a pull request changing 200 policies, held,
// invalid with long errors, gets one comment GitHub accepts, that still
// names the head commands bind to, keeps the marker by which the forge
// finds it, and leaves no <details> or code block open.
func TestCommentBodyFitsGitHub(t *testing.T) {
	head := strings.Repeat("ab", 20)
	rec := PullRecord{Number: 9, Author: "mallory", HeadCommit: head, ChangedPolicies: make([]string, 200),
		Validation: raftstore.Validation{Errors: make([]string, 30)}, HiddenReads: []string{"header:x-secret"}}
	for i := range rec.Validation.Errors {
		rec.Validation.Errors[i] = fmt.Sprintf("p%03d/policy.toml:%d: %s", i, i, strings.Repeat("```</details>", 500))
	}
	body := commentBody(rec, bigSummaries(200))
	n := utf8.RuneCountInString(body)
	t.Logf("200 policies, 30 long errors: %d code points", n)
	if n > preview.CommentBudget {
		t.Fatalf("%d code points: GitHub refuses more than %d", n, preview.MaxCommentChars)
	}
	for _, want := range []string{forge.Marker + "\n", "Policy preview of \\#9 at " + short(head), "Preview held", "Validation failed",
		"/reconciler commit", "experiments/pr-9?view=FULL", "Cut to fit one GitHub comment"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the comment", want)
		}
	}
	for _, bad := range mdcheck.Check(body, preview.CommentBudget, forge.Marker) {
		t.Error(bad)
	}
}
