package reconcile

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// commitMeta is what history needs of a source: a commit's author and
// message (gitsource.Source). A source without it stages without history.
type commitMeta interface {
	CommitMeta(hash string) (gitsource.CommitMeta, error)
}

// RequestedByTrailer is the trailer of a revert commit that names who
// asked for it. Rollback writes it; a revert pushed by hand may too.
const RequestedByTrailer = "Requested-by"

var revertSubject = regexp.MustCompile(`^Revert to generation ([0-9]{1,19}) \(`)

// rollbackMessage is the revert commit's message: the subject, and the
// trailer naming who asked when known.
func rollbackMessage(subject, requestedBy string) string {
	if requestedBy = inert(requestedBy); requestedBy == "" {
		return subject
	}
	return subject + "\n\n" + RequestedByTrailer + ": " + requestedBy + "\n"
}

// history reads what a generation's history shows from its commit. It is
// a label, not a decision: a commit it cannot read stages without one.
func (l *Loop) history(commit string) raftstore.History {
	src, ok := l.cfg.Source.(commitMeta)
	if !ok || IsDirCommit(commit) {
		return raftstore.History{}
	}
	m, err := src.CommitMeta(commit)
	if err != nil {
		l.log.Debug("commit author unreadable; staging without it", "revision", l.revision(commit), "error", err)
		return raftstore.History{}
	}
	return historyOf(m)
}

// historyOf turns what a commit says into bounded, inert history: a
// subject "Revert to generation N (…)" makes it a rollback of N, and its
// Requested-by trailer says who asked.
func historyOf(m gitsource.CommitMeta) raftstore.History {
	var h raftstore.History
	if m.AuthorName != "" || m.AuthorEmail != "" {
		h.Author = inert(strings.TrimSpace(m.AuthorName + " <" + m.AuthorEmail + ">"))
	}
	subject, body, _ := strings.Cut(m.Message, "\n")
	if sm := revertSubject.FindStringSubmatch(subject); sm != nil {
		if n, err := strconv.ParseUint(sm[1], 10, 64); err == nil {
			h.RollbackOf = n
		}
	}
	if h.RollbackOf == 0 {
		return h
	}
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), RequestedByTrailer) {
			h.RequestedBy = inert(v)
		}
	}
	return h
}

// inert makes text from a repository safe to store and show: valid
// UTF-8, no control or format characters (newlines, bidi overrides) that
// could forge a log line or reorder what a reader sees, single spaces,
// and at most raftstore.MaxHistoryText bytes. It stays text: markup is
// the renderer's to keep inert (the console sets textContent only).
func inert(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= raftstore.MaxHistoryText {
		return s
	}
	cut := raftstore.MaxHistoryText - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
