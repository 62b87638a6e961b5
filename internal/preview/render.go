package preview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// Marker is the hidden first line of the pull request comment, by which
// the forge finds the comment to edit in place (CONTRACT §5).
const Marker = "<!-- reconciler:preview -->"

// How much of the stats the renderings show.
const (
	topTransitions = 5
	shownSamples   = 3
)

// Report is what the pull request comment shows: one summary per changed
// policy and, for pull requests, the comment commands.
type Report struct {
	Title     string // "" means "Policy preview"
	Summaries []Summary
	Commands  bool
}

// RenderJSON writes the summaries as an indented JSON array.
func RenderJSON(w io.Writer, summaries []Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if summaries == nil {
		summaries = []Summary{}
	}
	return enc.Encode(summaries)
}

// RenderText writes the summaries for a terminal.
func RenderText(w io.Writer, summaries []Summary) error {
	var b strings.Builder
	for i, s := range summaries {
		if i > 0 {
			b.WriteString("\n")
		}
		textSummary(&b, s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func textSummary(b *strings.Builder, s Summary) {
	fmt.Fprintf(b, "%s: %s\n", s.Policy, verdictLine(s))
	if s.Experiment != "" {
		fmt.Fprintf(b, "  experiment:      %s (%s)\n", s.Experiment, stateText(s))
	}
	fmt.Fprintf(b, "  kind:            %s\n", s.Kind)
	fmt.Fprintf(b, "  experiment etag: %s\n  live etag:       %s\n", s.ExperimentEtag, orNone(s.LiveEtag))
	textCounts(b, "traffic", s.Stats.Counts)
	if s.Stats.Replayed.Evaluated > 0 {
		textCounts(b, "replayed", s.Stats.Replayed.Counts)
	}
	if w := s.Stats.Window; w != nil {
		fmt.Fprintf(b, "  window:          %s to %s\n", stamp(w.Start), stamp(w.End))
	}
	for _, n := range s.Stats.Nodes {
		fmt.Fprintf(b, "  node %s: %d evaluated, %d replayed, %d dropped\n", n.Node, n.Evaluated, n.Replayed, n.Dropped)
	}
	for _, t := range top(s.Stats) {
		fmt.Fprintf(b, "  %6d  %s -> %s\n", t.Count, outcomeOf(t.LiveDecision, t.LiveRule), outcomeOf(t.ExperimentDecision, t.ExperimentRule))
	}
	for _, smp := range samples(s.Stats) {
		fmt.Fprintf(b, "  sample: %s -> %s %s\n", outcomeOf(smp.LiveDecision, smp.LiveRule),
			outcomeOf(smp.ExperimentDecision, smp.ExperimentRule), compactJSON(smp.Request))
	}
}

func textCounts(b *strings.Builder, label string, c Counts) {
	fmt.Fprintf(b, "  %-16s %d evaluated, %d unchanged, %d allow->deny, %d deny->allow, %d rule changed, %d errors, %d dropped\n",
		label+":", c.Evaluated, c.Unchanged, c.AllowToDeny, c.DenyToAllow, c.RuleChanged, c.Errors, c.Dropped)
}

func verdictLine(s Summary) string {
	switch {
	case s.Failing:
		return "FAILING: " + s.Reason
	case s.NotPreviewed != "":
		return "not previewed: " + s.NotPreviewed
	case s.Stats.Changed()+s.Stats.Replayed.Changed() == 0:
		return "no decision changes"
	}
	return fmt.Sprintf("%d decision changes", s.Stats.Changed()+s.Stats.Replayed.Changed())
}

func stateText(s Summary) string {
	if s.State == "" {
		return "not started"
	}
	return string(s.State)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// top returns the transitions to show: live ones, else replayed ones.
func top(st Stats) []Transition {
	ts := st.Transitions
	if st.Evaluated == 0 {
		ts = st.Replayed.Transitions
	}
	return ts[:min(len(ts), topTransitions)]
}

// samples picks the samples to show: one per transition first, so that a
// few examples cover as many kinds of change as possible.
func samples(st Stats) []Sample {
	var out, rest []Sample
	seen := map[[4]string]bool{}
	for _, s := range st.Samples {
		k := [4]string{string(s.LiveDecision), s.LiveRule, string(s.ExperimentDecision), s.ExperimentRule}
		if seen[k] {
			rest = append(rest, s)
			continue
		}
		seen[k] = true
		out = append(out, s)
	}
	out = append(out, rest...)
	return out[:min(len(out), shownSamples)]
}

// compactJSON renders an already redacted request on one line. HTML
// characters stay escaped, so a request cannot inject markup.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// RenderMarkdown writes the report as the pull request comment: the
// marker, then per policy its etags, state, counts, top transitions, a
// few redacted sample diffs, node coverage and window, then the commands.
func RenderMarkdown(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString(Marker + "\n")
	title := r.Title
	if title == "" {
		title = "Policy preview"
	}
	fmt.Fprintf(&b, "## %s\n\n", mdText(title))
	if len(r.Summaries) == 0 {
		b.WriteString("No policy changes to preview.\n")
	}
	for _, s := range r.Summaries {
		mdSummary(&b, s)
	}
	if r.Commands {
		b.WriteString("---\nComment to act on this preview: `/reconciler preview start` · `/reconciler preview stop` · `/reconciler commit`\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdSummary(b *strings.Builder, s Summary) {
	status := "passing"
	if s.Failing {
		status = "**failing**"
	}
	fmt.Fprintf(b, "### %s (%s): %s\n\n", code(s.Policy), s.Kind, status)
	if s.Failing {
		fmt.Fprintf(b, "> %s\n\n", mdText(s.Reason))
	}
	b.WriteString("| | |\n|---|---|\n")
	if s.Experiment != "" {
		fmt.Fprintf(b, "| Experiment | %s |\n", tcell(code(s.Experiment)))
	}
	fmt.Fprintf(b, "| Experiment etag | %s |\n| Live etag | %s |\n", tcell(code(s.ExperimentEtag)), tcell(code(orNone(s.LiveEtag))))
	if s.Experiment != "" {
		fmt.Fprintf(b, "| Preview state | %s |\n", stateText(s))
	}
	if s.NotPreviewed != "" {
		fmt.Fprintf(b, "| Not previewed | %s |\n", tcell(mdText(s.NotPreviewed)))
	}
	if w := s.Stats.Window; w != nil {
		fmt.Fprintf(b, "| Window | %s to %s |\n", stamp(w.Start), stamp(w.End))
	}
	b.WriteString("\n")
	mdCounts(b, s.Stats, s.Experiment == "")
	mdTransitions(b, s.Stats)
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
		fmt.Fprintf(b, "| %s | %s | %d |\n", tcell(mdOutcome(t.LiveDecision, t.LiveRule)),
			tcell(mdOutcome(t.ExperimentDecision, t.ExperimentRule)), t.Count)
	}
	b.WriteString("\n")
}

func mdOutcome(v engine.Verdict, rule string) string {
	if rule == "" {
		return string(v) + " (default)"
	}
	return string(v) + " " + code(rule)
}

func mdSamples(b *strings.Builder, st Stats) {
	ss := samples(st)
	if len(ss) == 0 {
		return
	}
	fmt.Fprintf(b, "<details><summary>Sample changes (%d of %d kept, redacted)</summary>\n\n", len(ss), len(st.Samples))
	for _, s := range ss {
		fmt.Fprintf(b, "%s → %s\n\n", mdOutcome(s.LiveDecision, s.LiveRule), mdOutcome(s.ExperimentDecision, s.ExperimentRule))
		body, _ := json.MarshalIndent(s.Request, "", "  ")
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

// code renders s as an inline code span, with a backtick fence longer
// than any run inside, so names from a pull request cannot break out
// into markdown (mentions, links, HTML).
func code(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// fenceFor returns a code block fence longer than any backtick run in s.
func fenceFor(s string) string { return strings.Repeat("`", max(3, longestRun(s, '`')+1)) }

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// tcell escapes the pipes that would end a table cell (GFM honours \|
// even inside code spans).
func tcell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// mdText escapes markdown and HTML in free text such as reasons.
func mdText(s string) string {
	var b bytes.Buffer
	for _, r := range strings.NewReplacer("\n", " ", "\r", " ").Replace(s) {
		if strings.ContainsRune("\\`*_{}[]()<>#+!|@~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
