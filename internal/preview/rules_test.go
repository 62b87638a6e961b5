package preview_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// webWithPreviewRule is webPolicy with deny-http in preview.
func webWithPreviewRule() *policy.Policy {
	p := tightWeb()
	p.Rules[2].Preview = true
	return p
}

// A rule in preview is counted as if enforced, exactly as the live policy
// with that rule enforced would differ from live, logged with the log
// prefix under its own resource name, and never changes the answer.
func TestPreviewRuleCountedAsIfEnforced(t *testing.T) {
	t.Parallel()
	live := webWithPreviewRule()
	h := newHarness(t, preview.Config{UnchangedEvery: -1}, live)
	exps := preview.PreviewRules(h.live, 0)
	if len(exps) != 1 || exps[0].Name != "policies/web/rules/deny-http" {
		t.Fatalf("PreviewRules = %+v", exps)
	}
	h.set(exps...)
	reqs := craftedTraffic(500)
	h.offer("web", reqs...)

	enforced := webWithPreviewRule()
	enforced.Rules[2].Preview = false
	notPreviewed := webPolicy() // what live decides: the rule left out
	want, _ := expected(t, notPreviewed, enforced, reqs)
	got := h.stats(exps[0])
	if got.Counts != want || want.AllowToDeny == 0 {
		t.Fatalf("counts = %+v, want %+v (with some allow->deny)", got.Counts, want)
	}
	for _, r := range reqs {
		if d := h.live["web"].Evaluate(r); d.Rule == "deny-http" {
			t.Fatalf("the rule in preview decided %+v", d)
		}
	}
	lines := h.log.lines(t)
	if uint64(len(lines)) != want.Changed() {
		t.Fatalf("%d log lines, want %d", len(lines), want.Changed())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l["msg"].(string), preview.LogPrefix) || l["experiment"] != "policies/web/rules/deny-http" ||
			l["experiment_rule"] != "deny-http" {
			t.Fatalf("log line %v", l)
		}
	}
	// The view a policy resource shows: counts, samples only when asked.
	views := preview.RuleViews(live, h.sh.Stats(), 0, false)
	if len(views) != 1 || views[0].Stats == nil || views[0].Stats.AllowToDeny != want.AllowToDeny ||
		views[0].Stats.Samples != nil {
		t.Fatalf("RuleViews = %+v", views)
	}
	if full := preview.RuleViews(live, h.sh.Stats(), 0, true); len(full[0].Stats.Samples) == 0 {
		t.Fatal("no samples with samples asked for")
	}
}

// The counts of a rule in preview run on across a generation that changes
// another rule: they belong to the rule's content.
func TestPreviewRuleCountsSurviveOtherChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, preview.Config{}, webWithPreviewRule())
	h.set(preview.PreviewRules(h.live, 0)...)
	h.offer("web", craftedTraffic(100)...)
	next := webWithPreviewRule()
	next.Rules[0].Match = "request.path.startsWith('/admin/')"
	h.live["web"] = compile(t, next)
	exps := preview.PreviewRules(h.live, 0)
	h.set(exps...)
	h.offer("web", craftedTraffic(100)...)
	if got := h.stats(exps[0]).Evaluated; got != 200 {
		t.Fatalf("evaluated = %d, want 200", got)
	}
}

// Past the cap, rules in preview are listed, not evaluated.
func TestPreviewRulesCapped(t *testing.T) {
	t.Parallel()
	p := webPolicy()
	for i := range 4 {
		p.Rules = append(p.Rules, policy.Rule{Name: "r" + string(rune('a'+i)), Priority: int64(300 + i),
			Action: policy.ActionDeny, Match: "request.method == 'PUT'", Preview: true})
	}
	live := map[string]*engine.CompiledPolicy{"web": compile(t, p)}
	if got := preview.PreviewRules(live, 3); len(got) != 3 || got[2].Name != "policies/web/rules/rc" {
		t.Fatalf("PreviewRules = %d experiments", len(got))
	}
	views := preview.RuleViews(p, nil, 3, false)
	if len(views) != 4 || views[3].Previewed || views[3].Reason == "" {
		t.Fatalf("RuleViews = %+v", views)
	}
}

// A change that takes a rule out of preview, unchanged, shows what the
// rule counted in preview; one that also edits the rule does not (those
// counts were of another rule).
func TestSummaryOfAChangeThatEnforcesARule(t *testing.T) {
	t.Parallel()
	live := webWithPreviewRule()
	h := newHarness(t, preview.Config{}, live)
	h.set(preview.PreviewRules(h.live, 0)...)
	reqs := craftedTraffic(200)
	h.offer("web", reqs...)
	merged := preview.Merge(h.sh.NodeStats())

	flip := webWithPreviewRule()
	flip.Rules[2].Preview = false
	e := create(t, nil, "flip", flip)
	s := preview.Summarize(e, h.live["web"].Etag(), merged, preview.Thresholds{})
	want, _ := expected(t, webPolicy(), flip, reqs)
	if len(s.Enforced) != 1 || s.Enforced[0].Rule != "deny-http" || s.Enforced[0].Counts != want {
		t.Fatalf("enforced = %+v, want deny-http with %+v", s.Enforced, want)
	}
	var md strings.Builder
	if err := preview.RenderMarkdown(&md, preview.Report{Summaries: []preview.Summary{s}}); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf("| `deny-http` | %d | %d | %d |", want.Evaluated, want.AllowToDeny, want.DenyToAllow)
	if !strings.Contains(md.String(), "Rules this change enforces") || !strings.Contains(md.String(), row) {
		t.Fatalf("markdown lacks the enforced rule %q:\n%s", row, md.String())
	}

	edited := webWithPreviewRule()
	edited.Rules[2].Preview = false
	edited.Rules[2].Match = "request.scheme == 'http' && request.method == 'GET'"
	if s := preview.Summarize(create(t, nil, "edit", edited), "", merged, preview.Thresholds{}); len(s.Enforced) != 0 {
		t.Fatalf("an edited rule shows the old rule's counts: %+v", s.Enforced)
	}
}
