package webhook

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"
)

// decision is what a delivery asks for. It is computed before anything is
// called, so a redelivery or a malformed payload has no effect.
type decision struct {
	status  string // "accepted", "ignored" or "pong"
	reason  string
	trigger string   // non-empty: call Trigger with it
	command *Command // non-nil: enqueue it
}

// errMalformed means the payload does not parse as its event.
var errMalformed = errors.New("malformed payload")

// ignored is a decision to do nothing.
func ignored(format string, args ...any) decision {
	return decision{status: "ignored", reason: fmt.Sprintf(format, args...)}
}

// decide parses a verified payload and decides what it asks for. Only the
// events the reconciler uses are parsed; the rest are ignored.
func decide(event string, payload []byte, branch, repository string) (decision, error) {
	switch event {
	case "ping", "push", "pull_request", "issue_comment":
	default:
		return ignored("event %q is not used", event), nil
	}
	v, err := github.ParseWebHook(event, payload)
	if err != nil || v == nil {
		return decision{}, errMalformed
	}
	switch ev := v.(type) {
	case *github.PingEvent:
		return decision{status: "pong", reason: "hook " + fmt.Sprint(ev.GetHookID())}, nil
	case *github.PushEvent:
		if !sameRepo(repository, ev.GetRepo().GetFullName()) {
			return ignored("repository %s is not %s", ev.GetRepo().GetFullName(), repository), nil
		}
		return decidePush(ev, branch), nil
	case *github.PullRequestEvent:
		if !sameRepo(repository, ev.GetRepo().GetFullName()) {
			return ignored("repository %s is not %s", ev.GetRepo().GetFullName(), repository), nil
		}
		return decidePullRequest(ev, branch)
	case *github.IssueCommentEvent:
		if !sameRepo(repository, ev.GetRepo().GetFullName()) {
			return ignored("repository %s is not %s", ev.GetRepo().GetFullName(), repository), nil
		}
		return decideComment(ev)
	}
	return decision{}, errMalformed
}

// sameRepo reports whether a delivery is for the configured repository
// (any, when none is configured).
func sameRepo(want, got string) bool {
	return want == "" || strings.EqualFold(want, got)
}

// decidePush triggers for a branch push (creation and deletion included).
func decidePush(ev *github.PushEvent, branch string) decision {
	name, ok := strings.CutPrefix(ev.GetRef(), "refs/heads/")
	if !ok {
		return ignored("%q is not a branch", ev.GetRef())
	}
	if branch != "" && name != branch {
		return ignored("push to %s, not %s", name, branch)
	}
	what := shortSHA(ev.GetAfter())
	if ev.GetDeleted() {
		what = "deleted"
	}
	return decision{status: "accepted", reason: "push", trigger: "github push " + name + " " + what}
}

// pullActions are the pull request actions that change experiments.
var pullActions = map[string]bool{"opened": true, "synchronize": true, "reopened": true, "closed": true, "edited": true}

// decidePullRequest triggers for actions that change what the pull
// request proposes; "edited" only when the base branch changed.
func decidePullRequest(ev *github.PullRequestEvent, branch string) (decision, error) {
	action := ev.GetAction()
	if !pullActions[action] {
		return ignored("pull_request %q does not change experiments", action), nil
	}
	n := ev.GetNumber()
	if n == 0 {
		n = ev.GetPullRequest().GetNumber()
	}
	if n <= 0 {
		return decision{}, errMalformed
	}
	from := ev.GetChanges().GetBase().GetRef().GetFrom()
	if action == "edited" && ev.GetChanges().GetBase() == nil {
		return ignored("pull_request #%d edited without a base change", n), nil
	}
	if base := ev.GetPullRequest().GetBase().GetRef(); branch != "" && base != branch && from != branch {
		return ignored("pull_request #%d is into %s, not %s", n, base, branch), nil
	}
	if action == "closed" && ev.GetPullRequest().GetMerged() {
		action = "merged"
	}
	return decision{status: "accepted", reason: "pull_request " + action,
		trigger: fmt.Sprintf("github pull_request #%d %s", n, action)}, nil
}

// decideComment turns a "/reconciler ..." comment on a pull request into a
// command. Edited comments and comments by bots (the reconciler's own
// replies included) are ignored.
func decideComment(ev *github.IssueCommentEvent) (decision, error) {
	if ev.GetAction() != "created" {
		return ignored("issue_comment %q is not a new comment", ev.GetAction()), nil
	}
	issue := ev.GetIssue()
	if issue == nil || !issue.IsPullRequest() {
		return ignored("comment is not on a pull request"), nil
	}
	author := ev.GetComment().GetUser()
	if author.GetType() == "Bot" || ev.GetSender().GetType() == "Bot" {
		return ignored("comment by a bot"), nil
	}
	cmd, ok := ParseCommand(ev.GetComment().GetBody())
	if !ok {
		return ignored("comment is not a /reconciler command"), nil
	}
	if issue.GetNumber() <= 0 || author.GetLogin() == "" {
		return decision{}, errMalformed
	}
	cmd.PR, cmd.User, cmd.CommentID = issue.GetNumber(), author.GetLogin(), ev.GetComment().GetID()
	return decision{status: "accepted", reason: "command " + cmd.Verb, command: &cmd}, nil
}

// shortSHA is the 12-character prefix of a SHA.
func shortSHA(sha string) string { return sha[:min(len(sha), 12)] }
