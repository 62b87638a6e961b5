package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/policyrollout/reconciler/internal/errs"
)

// Sentinel errors, for errors.Is. The typed errors below match them and
// carry the details; their messages hold no credentials.
var (
	// ErrFetch means the remote could not be read (network, auth, not
	// found, timeout): the caller sets the PullError condition and keeps
	// serving what it has.
	ErrFetch = errs.Sentinel(errs.Unavailable, "gitsource: fetching from the policy repository failed")
	// ErrPull is the old name of ErrFetch ("pull" means a pull request).
	//
	// Deprecated: use ErrFetch.
	ErrPull = ErrFetch
	// ErrPushRefused means the remote refused a push: the branch moved,
	// the token may not write, or the branch is protected.
	ErrPushRefused = errs.Sentinel(errs.FailedPrecondition, "gitsource: the remote refused the push")
	// ErrPush means a push failed for any other reason (network, timeout).
	ErrPush = errs.Sentinel(errs.Unavailable, "gitsource: pushing to the policy repository failed")
	// ErrTooLarge means the policies root at a commit is over MaxFilesSize.
	ErrTooLarge = errors.New("gitsource: policies root too large")
	// ErrUnknownRevision means a commit is not in the clone.
	ErrUnknownRevision = errs.Sentinel(errs.FailedPrecondition, "gitsource: unknown revision")
	// ErrNoChange means a revert or commit would not change the branch:
	// its policies already are what was asked for.
	ErrNoChange = errs.Sentinel(errs.FailedPrecondition, "gitsource: nothing to commit")
)

// Reason says why talking to the remote failed, so callers and operators
// know whether waiting helps.
type Reason string

// The reasons.
const (
	ReasonNetwork  Reason = "network"   // retry later: the remote or the path to it is down
	ReasonTimeout  Reason = "timeout"   // retry later, or raise the timeout
	ReasonAuth     Reason = "auth"      // needs a human: the token is missing, wrong or lacks access
	ReasonNotFound Reason = "not-found" // needs a human: wrong URL or branch, or the repository is empty
	ReasonCanceled Reason = "canceled"  // the caller gave up (shutdown)
)

// hints say what to do next, per reason.
var hints = map[Reason]string{
	ReasonNetwork:  "retrying at the next poll",
	ReasonTimeout:  "retrying at the next poll; raise the timeout if the repository is large",
	ReasonAuth:     "check the token and its access to the repository",
	ReasonNotFound: "check git.url and git.branch",
	ReasonCanceled: "the operation was canceled",
}

// RemoteError is a failed conversation with the remote. It matches ErrFetch
// (Op "fetch") or ErrPush (Op "push"), and context.DeadlineExceeded or
// context.Canceled when that is the reason.
type RemoteError struct {
	Op     string // "fetch" or "push"
	URL    string // redacted
	Reason Reason
	Msg    string // scrubbed detail from the transport
}

// Error says what failed, where (redacted), why, and what happens next.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("git %s %s: %s: %s (%s)", e.Op, e.URL, e.Reason, e.Msg, hints[e.Reason])
}

// Is matches the sentinels. The transport's own error is not kept, since
// its text may hold a credential; Msg is its scrubbed message.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrFetch:
		return e.Op == "fetch"
	case ErrPush:
		return e.Op == "push"
	case context.DeadlineExceeded:
		return e.Reason == ReasonTimeout
	case context.Canceled:
		return e.Reason == ReasonCanceled
	}
	return false
}

// ErrCode implements errs.Coder: the remote cannot be reached now.
func (e *RemoteError) ErrCode() errs.Code { return errs.Unavailable }

// Retryable reports whether trying again later may succeed without a human.
func (e *RemoteError) Retryable() bool {
	return e.Reason == ReasonNetwork || e.Reason == ReasonTimeout
}

// PushRefusedError is a push the remote (or the fast-forward check before
// it) refused. Commit is the commit that was not pushed; it exists in the
// clone, so the caller may push it to another branch with PushBranch and
// open a pull request instead.
type PushRefusedError struct {
	Ref    string // the remote ref, e.g. refs/heads/main
	Commit string
	// Stale is true when the branch moved since it was read: fetch and
	// try again. Otherwise a human or another route (a pull request) is needed.
	Stale bool
	// Message is what the remote said (hook output, status), scrubbed.
	Message string
}

// Error gives the refused ref, the remote's words and what to do next.
func (e *PushRefusedError) Error() string {
	next := "push it to a branch and open a pull request"
	if e.Stale {
		next = "the branch moved; fetch and try again"
	}
	return fmt.Sprintf("git push %s refused: %s (%s)", e.Ref, e.Message, next)
}

// Is matches ErrPushRefused.
func (e *PushRefusedError) Is(target error) bool { return target == ErrPushRefused }

// ErrCode implements errs.Coder: a human or another route is needed.
func (e *PushRefusedError) ErrCode() errs.Code { return errs.FailedPrecondition }

// reasonOf classifies a transport error.
func reasonOf(err error) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return ReasonAuth
	case errors.Is(err, transport.ErrRepositoryNotFound),
		errors.Is(err, transport.ErrEmptyRemoteRepository):
		return ReasonNotFound
	}
	// The ssh transport reports key and host-key problems only in text.
	msg := err.Error()
	for _, s := range sshAuthTexts {
		if strings.Contains(msg, s) {
			return ReasonAuth
		}
	}
	return ReasonNetwork
}

// sshAuthTexts are what go-git's ssh transport says when a key is refused,
// no agent is reachable, or the host key is unknown or changed.
var sshAuthTexts = []string{"unable to authenticate", "SSH agent", "SSH_AUTH_SOCK", "knownhosts", "key mismatch"}

// remoteError wraps a transport error for op, scrubbed. A context that
// ended wins over what the transport made of it, since go-git sometimes
// reports a canceled request as a broken pipe or EOF.
func (c *Config) remoteError(ctx context.Context, op string, err error) error {
	reason := reasonOf(err)
	if ctxErr := ctx.Err(); ctxErr != nil && reason == ReasonNetwork {
		reason = reasonOf(ctxErr)
	}
	return &RemoteError{Op: op, URL: Redact(c.URL), Reason: reason, Msg: tidy(c.scrub(err.Error()))}
}

// tidy puts a transport message on one line and drops the repeats and
// empty tails go-git leaves ("authentication required: authentication
// required", "repository not found: ").
func tidy(msg string) string {
	var parts []string
	for _, p := range strings.Split(strings.Join(strings.Fields(msg), " "), ": ") {
		if p = strings.TrimSpace(p); p != "" && (len(parts) == 0 || parts[len(parts)-1] != p) {
			parts = append(parts, p)
		}
	}
	return strings.TrimSuffix(strings.Join(parts, ": "), ":")
}
