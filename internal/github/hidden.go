package github

import (
	"fmt"
	"strings"
)

// maxNoticeReads bounds the hidden request values a hold notice names;
// the record holds at most raftstore.MaxHiddenReads.
const maxNoticeReads = 16

// hiddenReadsNotice tells the writer who would approve a held pull
// request which hidden request values (not in [preview] show) its added
// or changed rules read: the per-rule counts the comment shows once the
// preview runs depend on them, so approving reveals something of them
// (docs/security.md). The names come from the pull request (attacker
// text): each is shown as inline code with its backticks replaced, in a
// bounded list.
func hiddenReadsNotice(reads []string) string {
	if len(reads) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nApproving reveals per-rule counts that depend on request values hidden from samples. The changed rules read:\n\n")
	for i, r := range reads {
		if i == maxNoticeReads {
			fmt.Fprintf(&b, "- … and %d more\n", len(reads)-i)
			break
		}
		fmt.Fprintf(&b, "- `%s`\n", codeText(r))
	}
	return b.String()
}

// maxCodeText bounds one name shown in a comment.
const maxCodeText = 80

// codeText makes s safe inside a one-line markdown code span: one line,
// no backtick to close the span, at most maxCodeText bytes (cut on a
// rune boundary).
func codeText(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '`':
			return '\''
		case r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029':
			return ' '
		}
		return r
	}, s)
	if len(s) > maxCodeText {
		s = strings.ToValidUTF8(s[:maxCodeText], "") + "…"
	}
	return s
}

// mdText makes a GitHub login safe in markdown text: logins are
// [A-Za-z0-9-], so anything else is dropped.
func mdText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return -1
	}, s)
}
