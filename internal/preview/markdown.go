package preview

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marker is the hidden first line of the pull request comment, by which
// the forge finds the comment to edit in place (CONTRACT §5).
const Marker = "<!-- reconciler:preview -->"

// MaxCommentChars is GitHub's limit on a comment body, in Unicode code
// points: a longer create or edit is refused (422 "Body is too long").
const MaxCommentChars = 65536

// CommentBudget is what RenderMarkdown fills by default: GitHub's limit
// less a margin, so that a line the forge adds or a count of characters
// that differs slightly from GitHub's never makes a comment too long.
const CommentBudget = MaxCommentChars - 1536

// minBudget is the smallest limit RenderMarkdown honours: the title, the
// commands and the line saying where the full report is always fit.
const minBudget = 2048

// Report is what the pull request comment shows: one summary per changed
// policy and, for pull requests, the comment commands.
type Report struct {
	Title     string // "" means "Policy preview"
	Summaries []Summary
	Commands  bool
	// Notes is trusted Markdown shown after the sections (a hold notice,
	// validation errors); it is dropped only if it alone would not fit.
	Notes string
	// FullReport is trusted Markdown saying where the full report is
	// (the CLI command, the API URL), shown on every comment that has
	// summaries. "" shows a generic line, only when sections were cut.
	FullReport string
	// Limit bounds the comment in Unicode code points (as GitHub counts);
	// 0 means CommentBudget.
	Limit int
}

// RenderMarkdown writes the report as the pull request comment, never
// longer than r.Limit code points: the marker and title, a summary table
// (one row per policy, failing ones first), then one collapsed <details>
// section per policy with its etags, state, counts, top transitions, a
// few redacted sample diffs, node coverage and window, then where the
// full report is and the commands. What does not fit is left out whole:
// table rows past the budget (past three quarters of it when not all
// rows fit, so the first sections still have room), then whole
// sections; nothing is cut inside a section, a table, a code block or an
// HTML element.
func RenderMarkdown(w io.Writer, r Report) error {
	_, err := io.WriteString(w, r.markdown())
	return err
}

// markdown lays the comment out within the limit.
func (r Report) markdown() string {
	limit := r.Limit
	if limit <= 0 {
		limit = CommentBudget
	}
	limit = max(limit, minBudget)
	sums := slices.Clone(r.Summaries)
	slices.SortStableFunc(sums, func(a, b Summary) int { return cmp.Compare(rank(a), rank(b)) })
	head := r.header(sums)
	n := len(sums)
	reserve := runes(head) + runes(r.footer(n, 0, 0))
	if reserve > limit { // oversized notes or pointer: keep the comment whole without them
		r.Notes, r.FullReport = "", ""
		reserve = runes(head) + runes(r.footer(n, 0, 0))
	}
	table, rows := summaryTable(sums, limit-reserve)
	if rows < n { // the table alone would take it all: leave room for the first (failing) sections
		table, rows = summaryTable(sums, (limit-reserve)*3/4)
	}
	left := limit - reserve - runes(table)
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(table)
	shown := 0
	for _, s := range sums {
		sec := section(s)
		if c := runes(sec); c <= left {
			b.WriteString(sec)
			left -= c
			shown++
		}
	}
	b.WriteString(r.footer(n, rows, shown))
	return b.String()
}

// rank orders the summaries: failing first, then those not previewed,
// then the rest, each in the given order (a stable sort).
func rank(s Summary) int {
	switch {
	case s.Failing:
		return 0
	case s.NotPreviewed != "":
		return 1
	}
	return 2
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// header is the marker, the title and one line of totals.
func (r Report) header(sums []Summary) string {
	title := r.Title
	if title == "" {
		title = "Policy preview"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## %s\n\n", Marker, mdText(clip(title, 200)))
	if len(sums) == 0 {
		b.WriteString("No policy changes to preview.\n\n")
		return b.String()
	}
	failing, unpreviewed := 0, 0
	for _, s := range sums {
		switch rank(s) {
		case 0:
			failing++
		case 1:
			unpreviewed++
		}
	}
	fmt.Fprintf(&b, "%s: %d failing, %d not previewed, %d passing.\n\n",
		plural(len(sums), "changed policy", "changed policies"), failing, unpreviewed, len(sums)-failing-unpreviewed)
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// footer is the notes, where the full report is (saying what was cut,
// when something was) and the commands. Its length grows with the
// numbers only, so footer(n, 0, 0) bounds it.
func (r Report) footer(total, rows, sections int) string {
	var b strings.Builder
	if cut := total - sections; cut > 0 {
		fmt.Fprintf(&b, "**Cut to fit one GitHub comment:** %d of %d policy sections are not shown", cut, total)
		if total > rows {
			fmt.Fprintf(&b, ", nor %d of %d rows of the table", total-rows, total)
		}
		b.WriteString(". ")
	}
	if total > 0 && (r.FullReport != "" || total > sections) {
		b.WriteString(r.fullReport() + "\n\n")
	}
	if b.WriteString(r.Notes); r.Notes != "" && !strings.HasSuffix(r.Notes, "\n") {
		b.WriteString("\n") // a "---" right after text would make it a heading
	}
	if r.Commands {
		b.WriteString("\n---\nComment to act on this preview: `/reconciler preview start` · `/reconciler preview stop` · `/reconciler commit`\n")
	}
	return b.String()
}

// fullReport is r.FullReport, or a generic pointer to the CLI and the API.
func (r Report) fullReport() string {
	if r.FullReport != "" {
		return r.FullReport
	}
	return FullReport("")
}

// FullReport says where the whole report of experiment id (every
// policy's section with its samples) is: the CLI command and the API URL.
// id "" names no experiment.
func FullReport(id string) string {
	cli, api := "ID", "{id}"
	if id != "" {
		cli, api = id, id
	}
	return "Full report: `reconciler experiments get --full POLICY " + cli + "` (and `reconciler experiments list POLICY`), " +
		"or `GET /v1/policies/{policy}/experiments/" + api + "?view=FULL` on the reconciler's API."
}
