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
func (l *Loop) history(st *raftstore.State, commit string) raftstore.History {
	src, ok := l.cfg.Source.(commitMeta)
	if !ok || IsDirCommit(commit) {
		return raftstore.History{}
	}
	m, err := src.CommitMeta(commit)
	if err != nil {
		l.log.Debug("commit author unreadable; staging without it", "revision", l.revision(commit), "error", err)
		return raftstore.History{}
	}
	h := historyOf(m)
	if h.RollbackOf == 0 {
		if reverted := revertedCommit(m.Message); reverted != "" {
			h.RollbackOf = restoredBy(st, reverted)
			h.RequestedBy = requestedBy(m.Message, h.RollbackOf)
		}
	}
	return h
}

// historyOf turns what a commit says into bounded, inert history: a
// subject "Revert to generation N (…)" makes it a rollback of N, and its
// Requested-by trailer says who asked.
func historyOf(m gitsource.CommitMeta) raftstore.History {
	var h raftstore.History
	if m.AuthorName != "" || m.AuthorEmail != "" {
		h.Author = inert(strings.TrimSpace(m.AuthorName + " <" + m.AuthorEmail + ">"))
	}
	subject, _, _ := strings.Cut(m.Message, "\n")
	if sm := revertSubject.FindStringSubmatch(subject); sm != nil {
		if n, err := strconv.ParseUint(sm[1], 10, 64); err == nil {
			h.RollbackOf = n
		}
	}
	h.RequestedBy = requestedBy(m.Message, h.RollbackOf)
	return h
}

// requestedBy is the Requested-by trailer of a rollback's message ("" when
// rollbackOf is 0: on any other commit the trailer means nothing).
func requestedBy(msg string, rollbackOf uint64) string {
	if rollbackOf == 0 {
		return ""
	}
	_, body, _ := strings.Cut(msg, "\n")
	who := ""
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), RequestedByTrailer) {
			who = inert(v)
		}
	}
	return who
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

// gitRevertSubject and gitRevertTrailer are what `git revert` writes:
// a subject `Revert "<subject>"` (`Reapply "…"` from git 2.43 for a
// revert of a revert, which restores what the first one undid) and a
// line naming the full hash.
var (
	gitRevertSubject = regexp.MustCompile(`^(Revert|Reapply) ".*"$`)
	gitRevertTrailer = regexp.MustCompile(`^This reverts commit ([0-9a-f]{40}|[0-9a-f]{64})\.$`)
)

// revertedCommit is the commit a `git revert` message says it reverts,
// "" for any other message.
func revertedCommit(msg string) string {
	subject, body, _ := strings.Cut(msg, "\n")
	if !gitRevertSubject.MatchString(strings.TrimSpace(subject)) {
		return ""
	}
	for _, line := range strings.Split(body, "\n") {
		if m := gitRevertTrailer.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			return m[1]
		}
	}
	return ""
}

// restoredBy is the generation a `git revert` of commit restores: the
// generation active before the one commit made, as the tool's own
// rollback from that generation would restore. 0 when commit is no
// generation's (a commit superseded before staging, or forgotten past
// the history limit), or nothing was active before it.
func restoredBy(st *raftstore.State, commit string) uint64 {
	reverted := uint64(0)
	for _, n := range st.GenerationNumbers() {
		if g, _ := st.Generation(n); g.Commit == commit && g.State != raftstore.GenerationInvalid {
			reverted = n
		}
	}
	restored := uint64(0)
	for _, n := range st.GenerationNumbers() {
		if g, _ := st.Generation(n); n < reverted && !g.ActivateTime.IsZero() {
			restored = n
		}
	}
	return restored
}
