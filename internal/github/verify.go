package github

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// verifyCommand re-reads cmd's comment by id from GitHub: a command is
// only what some node was handed (the internal enqueue endpoint, a
// follower's forward), so the leader acts only when the comment exists,
// belongs to the same pull request, has the recorded author, and its body
// still parses to the same command. why is empty when it does; err is a
// failed GitHub call (the caller retries a retryable one). cm is the
// comment as GitHub has it (its CreatedAt dates an approval).
func (g *Worker) verifyCommand(ctx context.Context, cmd webhook.Command) (cm forge.IssueComment, why string, err error) {
	if cmd.CommentID <= 0 {
		return cm, "no comment id", nil
	}
	cm, err = g.cfg.Forge.GetComment(ctx, cmd.CommentID)
	if errors.Is(err, forge.ErrNotFound) {
		return cm, "no such comment on GitHub", nil
	}
	if err != nil {
		return cm, "", err
	}
	got, ok := webhook.ParseCommand(cm.Body)
	switch {
	case cm.PR != cmd.PR:
		return cm, fmt.Sprintf("the comment is on #%d", cm.PR), nil
	case !strings.EqualFold(cm.User, cmd.User):
		return cm, fmt.Sprintf("the comment's author is %q", cm.User), nil
	case !ok || got.Verb != cmd.Verb || !slices.Equal(got.Args, cmd.Args):
		return cm, "the comment's body is not this command", nil
	}
	return cm, "", nil
}

// headAt is pull request n's head commit as last recorded ("" when it is
// not tracked): what a /reconciler commit received now binds to.
func (g *Worker) headAt(n int) string {
	return ReadPullRecords(g.cfg.Store.State())[n].HeadCommit
}

// headMoved is the reply to a /reconciler commit whose pull request's
// head moved after the command was received: nothing is merged that the
// commenter may not have seen.
func headMoved(cmd webhook.Command, seen, now string) string {
	return fmt.Sprintf("ABORTED: @%s, the head of #%d moved from %s to %s after your `/reconciler commit`; nothing was merged. Review the new commits and comment `/reconciler commit` again.",
		cmd.User, cmd.PR, short(seen), short(now))
}
