package preview

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/engine"
)

// The comment's invariants, shared by the golden, cut and fuzz tests.

// allowedTags are the only raw HTML a comment may hold: whatever else
// starts with an unescaped '<' outside code came from a pull request.
var allowedTags = []string{Marker, "<details>", "</details>", "<summary>", "</summary>"}

// CheckComment returns what breaks GitHub's rules or the comment's own in
// body: longer than limit code points, no marker line, a code block left
// open, unbalanced <details>/<summary>, raw HTML other than those, or a
// table whose rows have different numbers of cells.
func CheckComment(body string, limit int) []string {
	var bad []string
	if n := utf8.RuneCountInString(body); n > limit {
		bad = append(bad, fmt.Sprintf("%d code points, over %d", n, limit))
	}
	if !strings.HasPrefix(body, Marker+"\n") {
		bad = append(bad, "no marker line")
	}
	fence, depth, cells := "", 0, -1
	for i, line := range strings.Split(body, "\n") {
		if fence != "" {
			if strings.TrimSpace(line) == fence {
				fence = ""
			}
			continue
		}
		if run := leadingRun(line, '`'); run >= 3 {
			fence = strings.Repeat("`", run)
			cells = -1
			continue
		}
		if strings.HasPrefix(line, "|") {
			n := countCells(line)
			if cells >= 0 && n != cells {
				bad = append(bad, fmt.Sprintf("line %d: %d cells, the table has %d: %q", i+1, n, cells, line))
			}
			if cells < 0 {
				cells = n
			}
		} else {
			cells = -1
		}
		var msg string
		depth, msg = checkTags(stripCode(line), depth)
		if msg != "" {
			bad = append(bad, fmt.Sprintf("line %d: %s: %q", i+1, msg, line))
		}
	}
	if fence != "" {
		bad = append(bad, "code block left open")
	}
	if depth != 0 {
		bad = append(bad, fmt.Sprintf("%d <details> left open", depth))
	}
	return bad
}

func leadingRun(s string, c byte) int {
	n := 0
	for n < len(s) && s[n] == c {
		n++
	}
	return n
}

// countCells counts the unescaped pipes of a table line, as GFM splits
// rows (a backslash escapes the next character, also in code spans).
func countCells(line string) int {
	n := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '|':
			n++
		}
	}
	return n
}

// stripCode removes backslash escapes and CommonMark code spans (a
// backtick run closed by the next run of the same length).
func stripCode(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		switch {
		case line[i] == '\\' && i+1 < len(line):
			i += 2
		case line[i] == '`':
			run := leadingRun(line[i:], '`')
			if end := closingRun(line[i+run:], run); end >= 0 {
				i += run + end + run
				continue
			}
			b.WriteString(line[i : i+run])
			i += run
		default:
			b.WriteByte(line[i])
			i++
		}
	}
	return b.String()
}

// closingRun is the offset in s of the first backtick run of exactly n.
func closingRun(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		run := leadingRun(s[i:], '`')
		if run == n {
			return i
		}
		i += run
	}
	return -1
}

// checkTags follows the allowed tags of one line (outside code) and
// refuses any other '<'.
func checkTags(line string, depth int) (int, string) {
	open := 0
	for i := strings.IndexByte(line, '<'); i >= 0; i = strings.IndexByte(line, '<') {
		line = line[i:]
		tag := ""
		for _, t := range allowedTags {
			if strings.HasPrefix(line, t) {
				tag = t
			}
		}
		switch tag {
		case "":
			return depth, "raw HTML"
		case "<details>":
			depth++
		case "</details>":
			if depth--; depth < 0 {
				return 0, "</details> closes nothing"
			}
		case "<summary>":
			open++
		case "</summary>":
			open--
		}
		line = line[len(tag):]
	}
	if open != 0 {
		return depth, "<summary> not closed on its line"
	}
	return depth, ""
}

// Fixture is changed policy i of a pull request: with live counts,
// transitions, samples and nodes; every 7th fails its threshold, every
// 11th is not previewed.
func Fixture(i int) Summary {
	name := fmt.Sprintf("policy-%03d", i)
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	limit := 0.01
	s := Summary{Policy: "policies/" + name, Experiment: "policies/" + name + "/experiments/pr-7", Kind: KindUpdate,
		ExperimentEtag: fmt.Sprintf("exp-%08x", i*2654435761%(1<<32)), LiveEtag: fmt.Sprintf("live-%08x", i*40503),
		State: Active, Thresholds: Thresholds{MaxAllowToDenyRatio: &limit}}
	a2d, d2a := uint64(i%13), uint64(i%5)
	s.Stats = Stats{Experiment: s.Experiment, ExperimentEtag: s.ExperimentEtag, LiveEtag: s.LiveEtag,
		Tally: Tally{Counts: Counts{Evaluated: 1000, Unchanged: 1000 - a2d - d2a - 2, AllowToDeny: a2d, DenyToAllow: d2a, RuleChanged: 2}}}
	for k := range 3 {
		rule := fmt.Sprintf("rule-%d-%d", i, k)
		s.Stats.Transitions = append(s.Stats.Transitions, Transition{LiveRule: "", ExperimentRule: rule,
			LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: uint64(k + 1)})
		s.Stats.Samples = append(s.Stats.Samples, Sample{Time: start, LiveDecision: engine.Allow, ExperimentDecision: engine.Deny,
			ExperimentRule: rule, Request: map[string]any{"method": "GET", "path": fmt.Sprintf("/api/%d/%d", i, k), "headers": map[string]any{"x-user": "[redacted]"}}})
	}
	s.Stats.Window = &Window{Start: start, End: start.Add(time.Hour)}
	s.Stats.Nodes = []NodeCoverage{{Node: "n1", Evaluated: 400}, {Node: "n2", Evaluated: 300}, {Node: "n3", Evaluated: 300}}
	if i%7 == 3 {
		s.Failing, s.Reason = true, fmt.Sprintf("ALLOW→DENY for 1.%02d%% of live traffic, over max_allow_to_deny_ratio 0.01", i%100)
	}
	if i%11 == 5 {
		s.NotPreviewed = "the policy does not load or compile at this head"
		s.Stats = Stats{Experiment: s.Experiment, ExperimentEtag: s.ExperimentEtag}
		s.Failing, s.Reason = false, ""
	}
	return s
}

// Fixtures are changed policies 0 to n-1.
func Fixtures(n int) []Summary {
	out := make([]Summary, n)
	for i := range out {
		out[i] = Fixture(i)
	}
	return out
}
