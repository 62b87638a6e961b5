package github

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// hiddenReads are the request values hidden from samples
// (Redactor.Hidden) that matches read (engine.ValueReads), sorted, for the
// pull request's record: at most raftstore.MaxHiddenReads, the last then
// saying how many more, each at most raftstore.MaxKeyBytes. A match that
// does not parse does not compile either, and is never previewed.
func (g *Worker) hiddenReads(matches []string) []string {
	set := map[string]bool{}
	for _, m := range matches {
		reads, err := engine.ValueReads(m)
		if err != nil {
			continue
		}
		for _, r := range reads {
			if g.cfg.Redactor.Hidden(r) {
				set[raftstore.ClipText(r, raftstore.MaxKeyBytes)] = true
			}
		}
	}
	out := slices.Sorted(maps.Keys(set))
	if len(out) > raftstore.MaxHiddenReads {
		more := fmt.Sprintf("%s %d more", moreReads, len(out)-raftstore.MaxHiddenReads+1)
		out = append(out[:raftstore.MaxHiddenReads-1], more)
	}
	return out
}

// moreReads begins the last of a record's HiddenReads when there were
// more than it holds.
const moreReads = "… and"

// hiddenReadsNotice tells the writer who would approve a held pull
// request which hidden request values (not in [preview] show) its added
// or changed rules read: the per-rule counts the comment shows once the
// preview runs depend on them, so approving reveals something of them
// (docs/security.md). The names come from the pull request (attacker
// text): each is shown as inline code with its backticks and line breaks
// replaced and its length cut, at most raftstore.MaxHiddenReads of them.
func hiddenReadsNotice(reads []string) string {
	if len(reads) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nApproving reveals per-rule counts that depend on request values hidden from samples. The changed rules read:\n\n")
	for i, r := range reads {
		if i == raftstore.MaxHiddenReads {
			break // a record holds no more
		}
		if strings.HasPrefix(r, moreReads) { // the count hiddenReads wrote
			fmt.Fprintf(&b, "- %s\n", codeText(r))
			continue
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
		case unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return ' ' // line breaks, and bidi or zero-width marks that would disguise a name
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
