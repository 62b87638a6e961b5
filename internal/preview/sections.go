package preview

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
)

// summaryTable is the table of every policy's verdict, with as many rows
// as fit in budget; rows is how many it shows ("" and 0 when not even
// the header fits, or there is nothing to show).
func summaryTable(sums []Summary, budget int) (table string, rows int) {
	if len(sums) == 0 {
		return "", 0
	}
	const head = "| Policy | Verdict | Would deny | Would allow | Rule changed | Threshold |\n|---|---|--:|--:|--:|---|\n"
	var b strings.Builder
	left := budget - runes(head) - 1 // the blank line after the table
	for _, s := range sums {
		row := tableRow(s)
		if runes(row) > left {
			break
		}
		if rows == 0 {
			b.WriteString(head)
		}
		b.WriteString(row)
		left -= runes(row)
		rows++
	}
	if rows > 0 {
		b.WriteString("\n")
	}
	return b.String(), rows
}

// tableRow is one policy's row: its counts are those its thresholds judge
// (live traffic, else replayed traffic).
func tableRow(s Summary) string {
	name := cellCode(clip(strings.TrimPrefix(s.Policy, "policies/"), maxShownName))
	if s.NotPreviewed != "" && !s.Failing {
		return fmt.Sprintf("| %s | not previewed | – | – | – | %s |\n", name, thresholdText(s.Thresholds))
	}
	c := judged(s.Stats)
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %s |\n", name, verdictCell(s), c.AllowToDeny, c.DenyToAllow,
		c.RuleChanged, thresholdText(s.Thresholds))
}

// judged are the counts Thresholds.Check judges.
func judged(st Stats) Counts {
	if st.Evaluated == 0 {
		return st.Replayed.Counts
	}
	return st.Counts
}

func verdictCell(s Summary) string {
	v := "passing"
	if s.Failing {
		v = "**failing**"
	}
	if s.State != "" && s.State != Active {
		v += " (" + mdText(string(s.State)) + ")"
	}
	return v
}

// thresholdText says the limits: "ALLOW→DENY ≤ 1%, DENY→ALLOW ≤ 5%".
func thresholdText(t Thresholds) string {
	var parts []string
	if t.MaxAllowToDenyRatio != nil {
		parts = append(parts, "ALLOW→DENY ≤ "+ratioText(*t.MaxAllowToDenyRatio))
	}
	if t.MaxDenyToAllowRatio != nil {
		parts = append(parts, "DENY→ALLOW ≤ "+ratioText(*t.MaxDenyToAllowRatio))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func ratioText(r float64) string { return strconv.FormatFloat(100*r, 'g', 4, 64) + "%" }

// section is one policy's collapsed <details>: whole or not at all in a
// comment. Its <summary> line is raw HTML, so the name in it is escaped
// as HTML (htmlText); the Markdown inside follows a blank line.
func section(s Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary>%s: %s</summary>\n\n", htmlText(clip(strings.TrimPrefix(s.Policy, "policies/"), maxShownName)),
		sectionVerdict(s))
	mdSummary(&b, s)
	b.WriteString("</details>\n\n")
	return b.String()
}

// sectionVerdict is the plain-text verdict of a <summary> line.
func sectionVerdict(s Summary) string {
	switch {
	case s.Failing:
		return "FAILING"
	case s.NotPreviewed != "":
		return "not previewed"
	}
	c := judged(s.Stats)
	return fmt.Sprintf("passing, %d would deny, %d would allow", c.AllowToDeny, c.DenyToAllow)
}

func mdSummary(b *strings.Builder, s Summary) {
	if s.Failing {
		fmt.Fprintf(b, "> %s\n\n", mdText(s.Reason))
	}
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(b, "| Kind | %s |\n", mdText(string(s.Kind)))
	if s.Experiment != "" {
		fmt.Fprintf(b, "| Experiment | %s |\n", cellCode(s.Experiment))
	}
	fmt.Fprintf(b, "| Experiment etag | %s |\n| Live etag | %s |\n", cellCode(s.ExperimentEtag), cellCode(orNone(s.LiveEtag)))
	if s.Experiment != "" {
		fmt.Fprintf(b, "| Preview state | %s |\n", mdText(stateText(s)))
	}
	if s.NotPreviewed != "" {
		fmt.Fprintf(b, "| Not previewed | %s |\n", mdText(s.NotPreviewed))
	}
	if w := s.Stats.Window; w != nil {
		fmt.Fprintf(b, "| Window | %s to %s |\n", stamp(w.Start), stamp(w.End))
	}
	b.WriteString("\n")
	mdLists(b, s.ListChanges)
	mdCounts(b, s.Stats, s.Experiment == "")
	mdEnforced(b, s.Enforced)
	mdTransitions(b, s.Stats)
	mdSources(b, s.Stats)
	mdSamples(b, s.Stats)
	mdNodes(b, s.Stats)
}

// mdCounts writes the counts table; offline replays label their row
// "Recorded", since that traffic was not mirrored live.
func mdCounts(b *strings.Builder, st Stats, offline bool) {
	b.WriteString("| Traffic | Evaluated | Unchanged | ALLOW→DENY | DENY→ALLOW | Rule changed | Errors | Dropped |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	row := func(label string, c Counts) {
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", label,
			c.Evaluated, c.Unchanged, c.AllowToDeny, c.DenyToAllow, c.RuleChanged, c.Errors, c.Dropped)
	}
	label := "Live"
	if offline {
		label = "Recorded"
	}
	row(label, st.Counts)
	if st.Replayed.Evaluated > 0 {
		row("Replayed", st.Replayed.Counts)
	}
	b.WriteString("\n")
}

func mdTransitions(b *strings.Builder, st Stats) {
	ts := top(st)
	if len(ts) == 0 {
		return
	}
	b.WriteString("Top rule transitions:\n\n| Live | Experiment | Requests |\n|---|---|--:|\n")
	for _, t := range ts {
		fmt.Fprintf(b, "| %s | %s | %d |\n", mdOutcome(t.LiveDecision, t.LiveRule, cellCode),
			mdOutcome(t.ExperimentDecision, t.ExperimentRule, cellCode), t.Count)
	}
	b.WriteString("\n")
}

// mdOutcome names a decision, its rule shown by name (code or cellCode).
func mdOutcome(v engine.Verdict, rule string, name func(string) string) string {
	if rule == "" {
		return mdText(string(v)) + " (default)"
	}
	return mdText(string(v)) + " " + name(clip(rule, maxShownName))
}

func mdSamples(b *strings.Builder, st Stats) {
	ss := samples(st)
	if len(ss) == 0 {
		return
	}
	fmt.Fprintf(b, "<details><summary>Sample changes (%d of %d kept, redacted)</summary>\n\n", len(ss), len(st.Samples))
	for _, s := range ss {
		fmt.Fprintf(b, "%s → %s\n\n", mdOutcome(s.LiveDecision, s.LiveRule, code), mdOutcome(s.ExperimentDecision, s.ExperimentRule, code))
		body, _ := json.MarshalIndent(s.Request, "", "  ") // escapes <, > and &
		fence := fenceFor(string(body))
		fmt.Fprintf(b, "%sjson\n%s\n%s\n\n", fence, body, fence)
	}
	b.WriteString("</details>\n\n")
}

func mdNodes(b *strings.Builder, st Stats) {
	if len(st.Nodes) == 0 {
		return
	}
	parts := make([]string, len(st.Nodes))
	for i, n := range st.Nodes {
		parts[i] = fmt.Sprintf("%s %d evaluated, %d dropped", code(n.Node), n.Evaluated, n.Dropped)
	}
	fmt.Fprintf(b, "Nodes (%d): %s\n\n", len(st.Nodes), strings.Join(parts, "; "))
}

// mdEnforced lists the rules the change takes out of preview, with what
// they counted while in preview: the evidence for enforcing them.
func mdEnforced(b *strings.Builder, rules []EnforcedRule) {
	if len(rules) == 0 {
		return
	}
	b.WriteString("Rules this change enforces, counted while in preview:\n\n")
	b.WriteString("| Rule | Evaluated | ALLOW→DENY | DENY→ALLOW | Rule changed | Since |\n|---|--:|--:|--:|--:|---|\n")
	for _, r := range rules {
		since := "-"
		if r.Window != nil {
			since = stamp(r.Window.Start)
		}
		c := r.Counts
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %s |\n", cellCode(clip(r.Rule, maxShownName)), c.Evaluated,
			c.AllowToDeny, c.DenyToAllow, c.RuleChanged, since)
	}
	b.WriteString("\n")
}
