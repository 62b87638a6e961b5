package preview

import (
	"time"

	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// A rule with `preview = true` in a live policy never decides (the engine
// leaves it out); it is previewed as an experiment of its own: the live
// policy with that one rule enforced, ACTIVE for as long as the rule is in
// preview. Riding on the experiment path gives it everything experiments
// have: evaluation off the live path from the live decision (one changed
// rule: one more program in the DeltaSet walk), the preview log, the
// counts and samples under the redaction rules, replay of recorded
// traffic, the heartbeat merge across nodes, and the compile budget.

// SourcePreviewRule is the source of the experiment that stands for a
// rule in preview. Such experiments are made by every node from its live
// generation (PreviewRules) and never stored in raft.
const SourcePreviewRule SourceKind = "preview_rule"

// ruleCollection is the collection of a preview rule's resource name.
const ruleCollection = "/rules/"

// RuleResourceName is the name a preview rule's stats and preview log
// lines carry: "policies/{policy}/rules/{rule}". Rule names are free
// text; they come from the live branch, which people review.
func RuleResourceName(policyName, rule string) string {
	return "policies/" + policyName + ruleCollection + rule
}

// ParseRuleName splits a RuleResourceName; ok is false for any other name.
func ParseRuleName(name string) (policyName, rule string, ok bool) {
	rest, found := strings.CutPrefix(name, "policies/")
	if !found {
		return "", "", false
	}
	policyName, rule, found = strings.Cut(rest, ruleCollection)
	if !found || !idRE.MatchString(policyName) || rule == "" {
		return "", "", false
	}
	return policyName, rule, true
}

// PreviewRuleNames returns the rules of p in preview, in evaluation order,
// split at limit (0: DefaultMaxPerPolicy): the first limit are previewed,
// the others only listed. The cap of experiments per policy bounds them
// too, so the work per request and the label values of the metrics stay
// what that cap allows.
func PreviewRuleNames(p *policy.Policy, limit int) (previewed, over []string) {
	if limit <= 0 {
		limit = DefaultMaxPerPolicy
	}
	rules := slices.Clone(p.Rules)
	slices.SortStableFunc(rules, func(a, b policy.Rule) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Name, b.Name))
	})
	for _, r := range rules {
		if !r.Preview {
			continue
		}
		if len(previewed) < limit {
			previewed = append(previewed, r.Name)
		} else {
			over = append(over, r.Name)
		}
	}
	return previewed, over
}

// PreviewRules returns one ACTIVE experiment for each previewed rule of
// the live policies (see PreviewRuleNames), in policy then evaluation
// order: the live policy with that rule enforced. Its etag is the rule's
// own (RuleEtag), not the enforced policy's, so its counts run on while
// the rule is unchanged, across generations that change other rules.
func PreviewRules(live map[string]*engine.CompiledPolicy, limit int) []*Experiment {
	var out []*Experiment
	for _, name := range slices.Sorted(maps.Keys(live)) {
		src := live[name].Source()
		names, _ := PreviewRuleNames(src, limit)
		for _, rule := range names {
			out = append(out, previewRuleExperiment(src, rule))
		}
	}
	return out
}

func previewRuleExperiment(src *policy.Policy, rule string) *Experiment {
	enforced := *src
	enforced.Rules = slices.Clone(src.Rules)
	var etag string
	for i := range enforced.Rules {
		if enforced.Rules[i].Name == rule {
			etag = RuleEtag(enforced.Rules[i])
			enforced.Rules[i].Preview = false
		}
	}
	return &Experiment{
		Name: RuleResourceName(src.Name, rule), Etag: etag, Policy: &enforced,
		PreviewMetadata: &Metadata{State: Active, LogPrefix: LogPrefix},
		Source:          Source{Kind: SourcePreviewRule}, Previewed: true,
	}
}

// RuleEtag is the etag of one rule's content: the etag of a policy
// holding only that rule.
func RuleEtag(r policy.Rule) string {
	r.Pos = policy.Pos{}
	return (&policy.Policy{Rules: []policy.Rule{r}}).Etag()
}

// RuleView is a rule in preview as a policy resource shows it: its
// resource name, whether it is previewed (over the cap it is not, and
// Reason says so), and the cluster's counts of what it would have changed
// had it been enforced, since the rule last changed.
type RuleView struct {
	Rule      string `json:"rule"`
	Name      string `json:"name"`
	Previewed bool   `json:"previewed"`
	Reason    string `json:"notPreviewedReason,omitempty"`
	Stats     *Stats `json:"stats,omitempty"`
}

// RuleViews describes the rules of p in preview with their stats (the
// newest version's of each, the one whose etag is the rule's now).
func RuleViews(p *policy.Policy, stats []Stats, limit int, samples bool) []RuleView {
	previewed, over := PreviewRuleNames(p, limit)
	if len(previewed) == 0 {
		return nil
	}
	etags := map[string]string{}
	for _, r := range p.Rules {
		etags[r.Name] = RuleEtag(r)
	}
	byKey := map[cellKey]*Stats{}
	for i := range stats {
		byKey[cellKey{stats[i].Experiment, stats[i].ExperimentEtag}] = &stats[i]
	}
	out := make([]RuleView, 0, len(previewed)+len(over))
	for _, r := range previewed {
		name := RuleResourceName(p.Name, r)
		v := RuleView{Rule: r, Name: name, Previewed: true}
		if st := byKey[cellKey{name, etags[r]}]; st != nil {
			c := *st
			if !samples {
				c.Samples = nil
			}
			v.Stats = &c
		}
		out = append(out, v)
	}
	for _, r := range over {
		out = append(out, RuleView{Rule: r, Name: RuleResourceName(p.Name, r),
			Reason: fmt.Sprintf("over the cap of %d rules in preview per policy (preview.max_experiments_per_policy)", len(previewed))})
	}
	return out
}

// ActiveStats returns this node's stats of what it evaluates now: the
// ACTIVE experiments and rules in preview of the current view, at most
// the cap of each per policy, so that metrics labelled by them have as
// many label values as the caps allow, whatever names pull requests
// bring or however many experiments wait suspended.
func (s *Shadow) ActiveStats() []Stats {
	v := s.view.Load()
	var out []Stats
	for _, pol := range slices.Sorted(maps.Keys(v.active)) {
		for _, e := range v.active[pol] {
			out = append(out, e.cell.snapshot(time.Time{})) // counts only, for metrics
		}
	}
	return out
}

// EnforcedRule is a rule a proposed policy enforces that is in preview,
// with the same content, in the live one: the counts (no samples: they
// go to pull request comments) it gathered in preview.
type EnforcedRule struct {
	Rule   string  `json:"rule"`
	Counts Counts  `json:"counts"`
	Window *Window `json:"window,omitempty"`
}

// EnforcedRules finds the rules of p (a proposed version of a live
// policy) without `preview` whose live twin, the same rule with `preview
// = true`, has stats in merged: the live policy had it in preview, and p
// flips it to enforced. Only rules with stats are found: a rule in
// preview that no node evaluated has nothing to show.
func EnforcedRules(p *policy.Policy, merged []Stats) []EnforcedRule {
	if p == nil || len(merged) == 0 {
		return nil
	}
	byKey := make(map[cellKey]*Stats, len(merged))
	for i := range merged {
		if _, _, ok := ParseRuleName(merged[i].Experiment); ok {
			byKey[cellKey{merged[i].Experiment, merged[i].ExperimentEtag}] = &merged[i]
		}
	}
	if len(byKey) == 0 {
		return nil
	}
	var out []EnforcedRule
	for _, r := range p.Rules {
		if r.Preview {
			continue
		}
		twin := r
		twin.Preview = true
		if st := byKey[cellKey{RuleResourceName(p.Name, r.Name), RuleEtag(twin)}]; st != nil {
			out = append(out, EnforcedRule{Rule: r.Name, Counts: st.Counts, Window: st.Window})
		}
	}
	return out
}
