package github

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// helpText answers /reconciler help (docs/github.md).
const helpText = "Commands (first line of a comment; write, maintain or admin permission needed):\n\n" +
	"| Command | Does |\n|---|---|\n" +
	"| `/reconciler preview start` | start previewing this pull request's experiments on live traffic |\n" +
	"| `/reconciler preview stop` | stop previewing (the experiments stay) |\n" +
	"| `/reconciler status` | reply with the current summary |\n" +
	"| `/reconciler commit` | merge this pull request at the head commit the preview was computed from |\n" +
	"| `/reconciler help` | this list |\n"

// runCommand runs one comment command on the leader: once per comment id
// (a redelivery, to this leader or a later one, finds the command's claim
// in the replicated state: claimCommand), only for users GitHub says may
// write, answering with a reply comment. A command whose GitHub calls fail for a
// retryable reason is queued again later (retry: its claim is this
// leader's); nothing else is retried (the user comments again).
func (g *Worker) runCommand(ctx context.Context, q queuedCommand) {
	cmd := q.cmd
	if q.head == "" {
		q.head = g.headAt(cmd.PR)
	}
	if !q.retry {
		fresh, err := g.claimCommand(ctx, cmd)
		if err != nil {
			g.log.Warn("cannot record the comment command; not run", "pull", cmd.PR, "verb", cmd.Verb, "error", err)
			return
		}
		if !fresh {
			g.log.Info("comment command already handled", "pull", cmd.PR, "comment", cmd.CommentID)
			return
		}
	}
	reply, err := g.command(ctx, q)
	if err == nil && reply != "" {
		_, err = g.cfg.Forge.Comment(ctx, cmd.PR, reply)
	}
	if err == nil || ctx.Err() != nil {
		return
	}
	if !forge.Retryable(err) {
		g.log.Warn("comment command failed", "pull", cmd.PR, "verb", cmd.Verb, "error", err)
		return
	}
	d := g.retryDelay(err, g.cfg.Now())
	g.log.Info("comment command delayed by GitHub; retrying", "pull", cmd.PR, "verb", cmd.Verb, "in", d, "error", err)
	time.AfterFunc(d, func() {
		if ctx.Err() != nil {
			return
		}
		select {
		case g.commands <- queuedCommand{cmd: cmd, retry: true, head: q.head}:
			g.wake()
		default:
			g.log.Warn("comment command queue full; retry dropped", "pull", cmd.PR, "verb", cmd.Verb)
		}
	})
}

// command authorizes and runs q's command, and returns the reply to post.
func (g *Worker) command(ctx context.Context, q queuedCommand) (string, error) {
	cmd := q.cmd
	cm, why, err := g.verifyCommand(ctx, cmd)
	if err != nil || why != "" {
		if err == nil { // no reply: a forger must not make the bot comment anywhere
			g.log.Warn("comment command not found on GitHub as handed over; ignored",
				"pull", cmd.PR, "user", cmd.User, "verb", cmd.Verb, "comment", cmd.CommentID, "why", why)
		}
		return "", err
	}
	perm, err := g.cfg.Forge.Permission(ctx, cmd.User)
	if err != nil {
		return "", err
	}
	if !forge.CanWrite(perm) {
		g.log.Info("comment command refused", "pull", cmd.PR, "user", cmd.User, "permission", perm, "verb", cmd.Verb)
		return fmt.Sprintf("@%s, sorry: only users with write, maintain or admin permission on this repository may run `/reconciler` commands (yours: %s). Nothing was done.",
			cmd.User, perm), nil
	}
	g.log.Info("comment command", "pull", cmd.PR, "user", cmd.User, "verb", cmd.Verb, "args", cmd.Args)
	switch cmd.Verb {
	case webhook.VerbHelp:
		if cmd.Error != "" {
			return fmt.Sprintf("@%s: %s\n\n%s", cmd.User, cmd.Error, helpText), nil
		}
		return helpText, nil
	case webhook.VerbStatus:
		rec, ok := ReadPullRecords(g.cfg.Store.State())[cmd.PR]
		if !ok {
			return notTracked(cmd.PR), nil
		}
		return withoutMarker(commentBody(rec, g.pullSummaries(rec))), nil
	case webhook.VerbPreview:
		return g.setPullPreview(ctx, q, cm.CreatedAt)
	case webhook.VerbCommit:
		return g.commitPull(ctx, cmd, q.head, cm.CreatedAt)
	}
	return helpText, nil
}

// setPullPreview runs preview start/stop through the same AIP methods as
// the HTTP API (StartPreview/StopPreview) on every experiment "pr-N" of
// the pull request, and records the state on its record for the comment.
// A start on a non-writer's pull request approves one head
// (approvePreview); written is when GitHub says the comment was written.
func (g *Worker) setPullPreview(ctx context.Context, q queuedCommand, written time.Time) (string, error) {
	cmd := q.cmd
	rec, ok := ReadPullRecords(g.cfg.Store.State())[cmd.PR]
	if !ok {
		return notTracked(cmd.PR), nil
	}
	want, method := preview.Active, g.cfg.Experiments.StartPreview
	if len(cmd.Args) > 0 && cmd.Args[0] == "stop" {
		want, method = preview.Suspended, g.cfg.Experiments.StopPreview
	} else if !rec.Writer {
		return g.approvePreview(ctx, q, written)
	}
	notes := g.eachPullExperiment(ctx, cmd.PR, method)
	if err := g.setPullPreviewState(ctx, cmd.PR, want); err != nil {
		return fmt.Sprintf("UNAVAILABLE: could not record the preview state: %v", err), nil
	}
	return withNotes(fmt.Sprintf("Preview of #%d is %s.", cmd.PR, want), notes), nil
}

// eachPullExperiment runs method on every experiment of pull request n
// and returns a line for each that failed.
func (g *Worker) eachPullExperiment(ctx context.Context, n int, method func(context.Context, string) (*preview.Operation, error)) []string {
	var notes []string
	for _, name := range g.pullExperimentNames(n) {
		if _, err := method(ctx, name); err != nil {
			notes = append(notes, fmt.Sprintf("- `%s`: %v", name, err))
		}
	}
	return notes
}

// withNotes is reply followed by the notes, one per line.
func withNotes(reply string, notes []string) string {
	if len(notes) > 0 {
		reply += "\n\n" + strings.Join(notes, "\n")
	}
	return reply
}

// setPullPreviewState records the preview state of pull request n on its
// record (read and written under pullMu, as writePulls does).
func (g *Worker) setPullPreviewState(ctx context.Context, n int, want preview.State) error {
	g.pullMu.Lock()
	defer g.pullMu.Unlock()
	rec, ok := ReadPullRecords(g.cfg.Store.State())[n]
	if !ok || rec.Preview == string(want) {
		return nil
	}
	rec.Preview = string(want)
	_, err := g.cfg.Store.Propose(ctx, &raftstore.PutPull{Record: rec})
	return err
}

// pullExperimentNames are the AIP experiments of pull request n.
func (g *Worker) pullExperimentNames(n int) []string {
	var out []string
	for _, e := range g.cfg.Experiments.List() {
		if e.Source.Kind == preview.SourcePullRequest && e.Source.Number == n {
			out = append(out, e.Name)
		}
	}
	return out
}

// commitPull merges the pull request at seen, its head when the leader
// received the command, which must still be the commit its experiments
// were computed from (GitHub's merge API with sha), and which the preview
// comment showed before the comment was written (GitHub's times, as for
// an approval: headUnseen). A head that moved since (a push during a
// rate-limit delay: refused here, or by GitHub's 409), a comment
// delivered late, a head the comment does not show yet, or a pull request
// GitHub will not merge (405) changes nothing.
func (g *Worker) commitPull(ctx context.Context, cmd webhook.Command, seen string, written time.Time) (string, error) {
	rec, ok := ReadPullRecords(g.cfg.Store.State())[cmd.PR]
	if !ok || seen == "" {
		return notTracked(cmd.PR), nil
	}
	if rec.HeadCommit != seen {
		return headMoved(cmd, seen, rec.HeadCommit), nil
	}
	if refusal := headUnseen(cmd, rec, written, "merged"); refusal != "" {
		return refusal, nil
	}
	if !rec.Validation.Valid {
		return "FAILED_PRECONDITION: the pull request's policies are invalid (see `reconciler/validate`); nothing was merged.", nil
	}
	sha, err := g.MergePullRequest(ctx, cmd.PR, rec.HeadCommit)
	var perr *preview.Error
	if errors.As(err, &perr) && perr.Code == preview.Aborted {
		return headMoved(cmd, seen, "a newer commit"), nil
	}
	if errors.As(err, &perr) {
		return fmt.Sprintf("%s: %s.", perr.Code, perr.Msg), nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Merged #%d at %s as %s; the merge commit is promoted as a new generation (see `reconciler/promote` on it).",
		cmd.PR, short(rec.HeadCommit), short(sha)), nil
}

func notTracked(pr int) string {
	return fmt.Sprintf("NOT_FOUND: #%d is not tracked yet (no open pull request into the live branch seen at the last reconcile); try again shortly.", pr)
}

// withoutMarker drops the marker line, so a reply is never taken for the
// preview comment.
func withoutMarker(body string) string {
	return strings.TrimPrefix(body, forge.Marker+"\n")
}

// MergePullRequest is the commit of a pull request experiment through
// GitHub (for experiments.Service.CommitExperiment, the API's :commit, and
// `/reconciler commit`): it merges pull request n with sha = head, the
// commit the experiment etag was computed from, and triggers a reconcile.
// A head that moved (HTTP 409) is a *preview.Error ABORTED, a pull request
// GitHub will not merge (405) FAILED_PRECONDITION; nothing changes then.
func (g *Worker) MergePullRequest(ctx context.Context, n int, head string) (string, error) {
	sha, err := g.cfg.Forge.Merge(ctx, n, head, forge.MergeMerge)
	switch {
	case errors.Is(err, forge.ErrAborted):
		return "", &preview.Error{Code: preview.Aborted,
			Msg: fmt.Sprintf("the head of pull request #%d moved since the experiment was computed at %s; nothing was merged", n, short(head))}
	case errors.Is(err, forge.ErrFailedPrecondition):
		return "", &preview.Error{Code: preview.FailedPrecondition,
			Msg: fmt.Sprintf("GitHub cannot merge pull request #%d (conflicts, required reviews or checks, or branch rules); nothing was merged", n)}
	case err != nil:
		return "", err
	}
	g.log.Info("pull request merged", "pull", n, "head", head, "merge_commit", sha)
	g.cfg.Trigger()
	return sha, nil
}
