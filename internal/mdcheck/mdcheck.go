// Package mdcheck checks, for tests, that a pull request comment is one
// GitHub accepts and renders whole: within its length limit, every code
// block and <details> closed, no table row with a cell too many, and no
// raw HTML but the few tags the renderer writes (so a name from a pull
// request that got through unescaped shows up as raw HTML or as a broken
// table). It follows CommonMark and GFM closely enough for the renderer's
// output; it is not a Markdown parser.
package mdcheck

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// allowedTags are the only raw HTML a comment may hold besides its
// marker: whatever else starts with an unescaped '<' outside code came
// from a pull request.
var allowedTags = []string{"<details>", "</details>", "<summary>", "</summary>"}

// Check returns what breaks GitHub's rules or the comment's own in body:
// longer than limit code points (as GitHub counts), a first line other
// than marker, a code block left open, unbalanced <details>/<summary>,
// raw HTML other than those and marker, a bidi, zero-width or control
// character outside code blocks, or a table whose rows have
// different numbers of cells. Nil means body is a whole comment.
func Check(body string, limit int, marker string) []string {
	var bad []string
	if n := utf8.RuneCountInString(body); n > limit {
		bad = append(bad, fmt.Sprintf("%d code points, over %d", n, limit))
	}
	if !strings.HasPrefix(body, marker+"\n") {
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
		if strings.IndexFunc(line, disguising) >= 0 {
			bad = append(bad, fmt.Sprintf("line %d: a bidi, zero-width or control character: %q", i+1, line))
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
		depth, msg = checkTags(stripCode(line), depth, marker)
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

// disguising reports whether r could disguise a name: control characters,
// bidi and zero-width marks, line and paragraph separators.
func disguising(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
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
func checkTags(line string, depth int, marker string) (int, string) {
	open := 0
	for i := strings.IndexByte(line, '<'); i >= 0; i = strings.IndexByte(line, '<') {
		line = line[i:]
		tag := ""
		for _, t := range append([]string{marker}, allowedTags...) {
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
