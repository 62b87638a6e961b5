package preview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// How much of the stats the renderings show.
const (
	topTransitions = 5
	shownSamples   = 3
)

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
	for _, c := range s.ListChanges {
		fmt.Fprintf(b, "  list %s (%s): +%d -%d entries, %d in all\n", c.Name, c.File, c.Added, c.Removed, c.Entries)
	}
	textCounts(b, "traffic", s.Stats.Counts)
	if s.Stats.Replayed.Evaluated > 0 {
		textCounts(b, "replayed", s.Stats.Replayed.Counts)
	}
	if w := s.Stats.Window; w != nil {
		fmt.Fprintf(b, "  window:          %s to %s\n", stamp(w.Start), stamp(w.End))
	}
	for _, r := range s.Enforced {
		fmt.Fprintf(b, "  enforces %s, counted in preview: %d evaluated, %d ALLOW->DENY, %d DENY->ALLOW\n",
			r.Rule, r.Counts.Evaluated, r.Counts.AllowToDeny, r.Counts.DenyToAllow)
	}
	for _, n := range s.Stats.Nodes {
		fmt.Fprintf(b, "  node %s: %d evaluated, %d replayed, %d dropped\n", n.Node, n.Evaluated, n.Replayed, n.Dropped)
	}
	for _, t := range top(s.Stats) {
		fmt.Fprintf(b, "  %6d  %s -> %s\n", t.Count, outcomeOf(t.LiveDecision, t.LiveRule), outcomeOf(t.ExperimentDecision, t.ExperimentRule))
	}
	for _, src := range TopSources(s.Stats) {
		fmt.Fprintf(b, "  source %s: %d sample changes\n", src.Address, src.Count)
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

// code renders s as an inline code span, with a backtick fence longer
// than any run inside, so names from a pull request cannot break out
// into markdown (mentions, links, HTML).
func code(s string) string {
	s = plain(s)
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
