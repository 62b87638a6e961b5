package preview

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Everything a pull request chose (policy, rule, branch and node names,
// reasons, sample values) reaches the comment through one of these, so
// that it stays inert text: no markup, mention, link, HTML or math, and
// no way to end a table cell, a code span, a code block or a <details>
// section early.

// maxShownName bounds one name in the summary table and in a section's
// <summary> line, so one row or line cannot take the comment's budget.
const maxShownName = 100

// mdText escapes free text (a reason, a title) for a Markdown paragraph or
// table cell: the characters that start emphasis, code, links, images,
// headings, mentions (@), math ($), entities (&), HTML (<) or end a cell
// (|) are backslash-escaped (they render as themselves); line breaks
// become spaces.
func mdText(s string) string {
	var b strings.Builder
	for _, r := range plain(s) {
		switch {
		case strings.ContainsRune(mdSpecial, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdSpecial are the characters mdText escapes: those the renderer
// escaped before, plus $ (GitHub's math) and & (entities).
const mdSpecial = "\\`*_{}[]()<>#+!|@~$&"

// htmlText escapes text for a raw HTML line such as <summary>…</summary>,
// where Markdown is not parsed: everything but ASCII letters, digits,
// spaces, '-' and '.' becomes a numeric character reference, line breaks
// and control characters become spaces.
func htmlText(s string) string {
	var b strings.Builder
	for _, r := range plain(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ' ' || r == '-' || r == '.':
			b.WriteRune(r)
		default:
			b.WriteString("&#" + strconv.Itoa(int(r)) + ";")
		}
	}
	return b.String()
}

// cellCode shows a name as a code span inside a table cell. A pipe is
// escaped (GFM splits rows before parsing code spans and honours \| in
// them); a name with a backslash is shown as escaped text instead,
// because "\\|" would end the cell and a code span cannot escape "\".
func cellCode(s string) string {
	if strings.Contains(s, `\`) {
		return mdText(s)
	}
	return strings.ReplaceAll(code(s), "|", `\|`)
}

// plain makes s one line of visible text: control characters, line and
// paragraph separators, and the bidi and zero-width marks that would
// disguise a name (Unicode Cf) become spaces.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return ' '
		}
		return r
	}, s)
}

// clip cuts s to at most n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
