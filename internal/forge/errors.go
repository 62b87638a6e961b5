package forge

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// Sentinel errors, for errors.Is. *Error matches exactly one of them; its
// message says what failed and what to do next. The names follow the
// AIP-193 codes the API maps them to.
var (
	// ErrNotFound: the repository, pull request or comment does not exist,
	// or the token cannot see it.
	ErrNotFound = errors.New("forge: not found")
	// ErrFailedPrecondition: GitHub refused because of the object's state;
	// for a merge (HTTP 405) the pull request is not mergeable (conflicts,
	// required checks or reviews, already closed).
	ErrFailedPrecondition = errors.New("forge: failed precondition")
	// ErrAborted: the object changed under us; for a merge (HTTP 409) the
	// head moved since the SHA the caller gave. Re-read and decide again.
	ErrAborted = errors.New("forge: aborted")
	// ErrAlreadyExists: e.g. an open pull request for that head and base.
	ErrAlreadyExists = errors.New("forge: already exists")
	// ErrPermissionDenied: the token may not do this (HTTP 403 that is not
	// a rate limit). Needs a human.
	ErrPermissionDenied = errors.New("forge: permission denied")
	// ErrUnauthenticated: GitHub rejected the token (HTTP 401). Needs a human.
	ErrUnauthenticated = errors.New("forge: unauthenticated")
	// ErrInvalidArgument: GitHub (HTTP 422) or this package refused the
	// input.
	ErrInvalidArgument = errors.New("forge: invalid argument")
	// ErrUnavailable: GitHub answered 5xx or could not be reached, after
	// the retries. Retry later.
	ErrUnavailable = errors.New("forge: unavailable")
)

// hints say what to do next, per kind.
var hints = map[error]string{
	ErrNotFound:           "check github.repository and the token's access to it",
	ErrFailedPrecondition: "refused in its current state; for a merge: not mergeable (conflicts, checks, reviews, closed)",
	ErrAborted:            "it changed meanwhile; read it again and decide anew",
	ErrAlreadyExists:      "it exists already",
	ErrPermissionDenied:   "the token lacks a permission, or a branch rule forbids this",
	ErrUnauthenticated:    "check the token",
	ErrInvalidArgument:    "the request was refused as invalid",
	ErrUnavailable:        "GitHub is unavailable; retry later",
}

// Error is a failed GitHub call. It holds no part of the request (whose
// headers carry the token): only the operation, the HTTP status and
// GitHub's scrubbed message.
type Error struct {
	Op      string // e.g. "merge pull request #4"
	Status  int    // HTTP status; 0 when there was no answer
	Kind    error  // one of the sentinels
	Message string // GitHub's message, scrubbed
	cause   error  // only a context's error, never a transport's
}

// Error says what failed, GitHub's words and what to do next.
func (e *Error) Error() string {
	status := ""
	if e.Status != 0 {
		status = fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	return fmt.Sprintf("github: %s%s: %s (%s)", e.Op, status, e.Message, hints[e.Kind])
}

// Is matches the error's kind, and a context's end when that was the cause.
func (e *Error) Is(target error) bool {
	return target == e.Kind || (e.cause != nil && errors.Is(e.cause, target))
}

// ErrRateLimited is a rate limit that lasts longer than the client waits
// (Config.MaxWait) or outlasted its attempts. Until is when GitHub will
// answer again; callers retry after it instead of blocking.
type ErrRateLimited struct {
	Op    string
	Until time.Time
	// Limit is "primary" (403, X-RateLimit-Remaining: 0), "secondary"
	// (403 secondary/abuse limit) or "429".
	Limit string
}

// Error says which limit and until when.
func (e *ErrRateLimited) Error() string {
	return fmt.Sprintf("github: %s: %s rate limit; retry after %s", e.Op, e.Limit, e.Until.UTC().Format(time.RFC3339))
}

// Retryable reports whether err may go away without a human: a rate limit
// or GitHub being unavailable.
func Retryable(err error) bool {
	var rl *ErrRateLimited
	return errors.As(err, &rl) || errors.Is(err, ErrUnavailable)
}

// RetryAt returns when a rate-limited call may be tried again.
func RetryAt(err error) (time.Time, bool) {
	var rl *ErrRateLimited
	if errors.As(err, &rl) {
		return rl.Until, true
	}
	return time.Time{}, false
}

// invalidf is an ErrInvalidArgument raised before any request.
func invalidf(format string, args ...any) error {
	return &Error{Op: "configure", Kind: ErrInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// kindOf maps an HTTP status to a sentinel.
func kindOf(status int, msg string) error {
	switch {
	case status == http.StatusUnauthorized:
		return ErrUnauthenticated
	case status == http.StatusForbidden:
		return ErrPermissionDenied
	case status == http.StatusNotFound, status == http.StatusGone:
		return ErrNotFound
	case status == http.StatusMethodNotAllowed:
		return ErrFailedPrecondition
	case status == http.StatusConflict:
		return ErrAborted
	case status == http.StatusUnprocessableEntity && strings.Contains(msg, "already exists"):
		return ErrAlreadyExists
	case status >= 500:
		return ErrUnavailable
	}
	return ErrInvalidArgument
}

// describe is GitHub's message and its field errors, on one line.
func describe(er *github.ErrorResponse) string {
	parts := []string{er.Message}
	for _, e := range er.Errors {
		switch {
		case e.Message != "":
			parts = append(parts, e.Message)
		case e.Field != "":
			parts = append(parts, e.Field+" "+e.Code)
		}
	}
	return strings.Join(parts, ": ")
}

// Token-shaped strings, scrubbed wherever they turn up.
var (
	userinfoRE = regexp.MustCompile(`://[^/@\s]*@`)
	authHdrRE  = regexp.MustCompile(`(?i)(authorization:\s*)[^\r\n]*`)
	bearerRE   = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`)
	ghTokenRE  = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})`)
)

// redacted replaces secrets.
const redacted = "[REDACTED]"

// scrub removes the token, URL credentials, Authorization values and
// anything shaped like a GitHub token from s, and keeps it to one line.
func (c *Client) scrub(s string) string {
	if c.cfg.Token != "" {
		s = strings.ReplaceAll(s, c.cfg.Token, redacted)
	}
	s = userinfoRE.ReplaceAllString(s, "://"+redacted+"@")
	s = authHdrRE.ReplaceAllString(s, "${1}"+redacted)
	s = bearerRE.ReplaceAllString(s, "${1} "+redacted)
	s = ghTokenRE.ReplaceAllString(s, redacted)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
