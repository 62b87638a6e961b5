package github

import (
	"context"
	"fmt"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// A pull request from a user without write permission (a fork's) chooses
// the rules evaluated on live traffic, so its preview runs only for a head
// a writer approved with `/reconciler preview start`, as GitHub runs a
// fork's workflows only for the commit a maintainer approved. The
// approval is bound to the head the leader had recorded when the command
// came (queuedCommand.head, as for /reconciler commit) and only counts
// when the writer could have seen that head (headUnseen), so a comment
// written for an older head and delivered late approves nothing. It is
// kept on the replicated record (ApprovedHead), so a new leader honours
// it; a push past it holds the preview again (carried, stopHeld).
//
// "Could have seen" compares GitHub's clock with GitHub's clock: the
// command comment's created_at with the updated_at GitHub gave the preview
// comment's edit that first named the head (HeadShownAt, recordShown).
// The leader's clock is never compared with GitHub's: a leader whose clock
// runs behind would otherwise date a new head before an approval written
// for the old one.

// judgeAuthors asks GitHub, for each pull request not recorded yet,
// whether its author may write. A non-writer's preview is held until a
// writer approves its head, and its comment never shows sample requests.
// A failed permission call holds it too.
func (g *Worker) judgeAuthors(ctx context.Context, want map[int]PullRecord) {
	old := ReadPullRecords(g.cfg.Store.State())
	for n, rec := range want {
		if _, ok := old[n]; ok {
			continue
		}
		perm, err := g.cfg.Forge.Permission(ctx, rec.Author)
		rec.Writer = err == nil && forge.CanWrite(perm)
		if !rec.Writer {
			rec.Preview = string(preview.Suspended)
			g.log.Info("pull request from a user without write permission; its preview waits for a writer's /reconciler preview start",
				"pull", n, "author", rec.Author, "permission", perm, "error", err)
		}
		want[n] = rec
	}
}

// held reports whether rec's experiments must not run by themselves:
// stopped by command, or a non-writer's head no writer approved.
func held(rec PullRecord) bool {
	return rec.Preview == string(preview.Suspended) || !rec.Writer && rec.ApprovedHead != rec.HeadCommit
}

// PullUnapproved reports whether pull request n is a non-writer's whose
// head no writer approved (experiments.PullRequests), read from the
// replicated record as it is now, so that the experiment service decides
// on the approval current when it holds its lock: a pass computed before
// an approval does not stop the preview the approval started. A pull
// request not recorded (past raftstore's bounds) counts as unapproved.
func (g *Worker) PullUnapproved(n int, head string) bool {
	rec, ok := ReadPullRecords(g.cfg.Store.State())[n]
	return !ok || !rec.Writer && rec.ApprovedHead != head
}

// carried is rec, just computed, with what only the replicated record
// prev knows: the preview state and author judgement (commands,
// judgeAuthors), the approval, and since when GitHub shows its head (only
// for the same head: a head that moves away and back is dated again). A
// non-writer's pull request whose head is not the approved one is held.
func carried(prev, rec PullRecord) PullRecord {
	if prev.Preview != "" {
		rec.Preview, rec.Writer = prev.Preview, prev.Writer
	}
	rec.ApprovedHead, rec.ApprovedBy = prev.ApprovedHead, prev.ApprovedBy
	if prev.HeadCommit == rec.HeadCommit {
		rec.HeadShown, rec.HeadShownAt = prev.HeadShown, prev.HeadShownAt
	}
	if !rec.Writer && rec.HeadCommit != rec.ApprovedHead {
		rec.Preview = string(preview.Suspended)
	}
	return rec
}

// approvePreview is a writer's `/reconciler preview start` on a
// non-writer's pull request, written at written: it records the approval
// of q.head and starts the experiments still at that head.
func (g *Worker) approvePreview(ctx context.Context, q queuedCommand, written time.Time) (string, error) {
	cmd := q.cmd
	refusal, err := g.recordApproval(ctx, cmd, q.head, written)
	if err != nil {
		return fmt.Sprintf("UNAVAILABLE: could not record the approval: %v", err), nil
	}
	if refusal != "" {
		return refusal, nil
	}
	g.log.Info("a writer approved the preview of a non-writer's pull request", "pull", cmd.PR, "user", cmd.User, "head", q.head)
	notes := g.eachPullExperiment(ctx, cmd.PR, func(ctx context.Context, name string) (*preview.Operation, error) {
		return g.cfg.Experiments.StartPreviewAt(ctx, name, q.head)
	})
	return withNotes(fmt.Sprintf("Preview of #%d is ACTIVE at %s, approved by @%s. A later push holds it again until a writer approves the new head.",
		cmd.PR, short(q.head), cmd.User), notes), nil
}

// recordApproval records, under pullMu, cmd's approval of head on pull
// request cmd.PR, unless the record moved past head or the comment was
// not written after the preview comment showed head (headUnseen): then it
// returns the refusal to reply, and nothing changes.
func (g *Worker) recordApproval(ctx context.Context, cmd webhook.Command, head string, written time.Time) (string, error) {
	g.pullMu.Lock()
	defer g.pullMu.Unlock()
	rec, ok := ReadPullRecords(g.cfg.Store.State())[cmd.PR]
	switch {
	case !ok || head == "":
		return notTracked(cmd.PR), nil
	case rec.HeadCommit != head:
		return fmt.Sprintf("ABORTED: @%s, the head of #%d moved from %s to %s after your `/reconciler preview start`; nothing was started. Review %s and comment `/reconciler preview start` again.",
			cmd.User, cmd.PR, short(head), short(rec.HeadCommit), short(rec.HeadCommit)), nil
	}
	if refusal := headUnseen(cmd, rec, written, "started"); refusal != "" {
		return refusal, nil
	}
	rec.Preview, rec.ApprovedHead = string(preview.Active), head
	rec.ApprovedBy = raftstore.ClipText(cmd.User, raftstore.MaxKeyBytes)
	_, err := g.cfg.Store.Propose(ctx, &raftstore.PutPull{Record: rec})
	return "", err
}

// recordShown records, under pullMu, that GitHub says (at, its
// updated_at of the preview comment) the comment shows head of pull
// request n. Nothing changes when the record moved to another head
// meanwhile (a push during the edit: the next pass shows and dates that
// one) or already dates head: the first date stands, so a new leader that
// edits the comment again does not move it (a later one would only
// refuse more). An answer without a date records nothing: the commands
// stay refused.
func (g *Worker) recordShown(ctx context.Context, n int, head string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("GitHub's answer for the comment on #%d has no updated_at", n)
	}
	g.pullMu.Lock()
	defer g.pullMu.Unlock()
	rec, ok := ReadPullRecords(g.cfg.Store.State())[n]
	if !ok || rec.HeadCommit != head || rec.HeadShown == head {
		return nil
	}
	rec.HeadShown, rec.HeadShownAt = head, at.UTC()
	if _, err := g.cfg.Store.Propose(ctx, &raftstore.PutPull{Record: rec}); err != nil {
		return fmt.Errorf("recording that the comment on #%d shows %s: %w", n, short(head), err)
	}
	return nil
}

// headUnseen is the refusal of a command GitHub dates written (its
// created_at) on the pull request of rec, "" when its writer could have
// seen rec's head: GitHub dates it strictly after the preview comment
// first showed that head (HeadShownAt). Both are whole seconds of GitHub's
// clock, so a command written in the same second as the edit is refused
// too, and its writer comments again. While the comment does not show the
// head yet (its edit failed or is rate-limited), every command is refused:
// nothing says the writer saw it. done is what was not done ("started",
// "merged").
func headUnseen(cmd webhook.Command, rec PullRecord, written time.Time, done string) string {
	verb := "`/reconciler " + cmd.Verb + "`"
	if cmd.Verb == webhook.VerbPreview {
		verb = "`/reconciler preview start`"
	}
	head := short(rec.HeadCommit)
	if rec.HeadShown != rec.HeadCommit || rec.HeadShownAt.IsZero() {
		return fmt.Sprintf("UNAVAILABLE: @%s, the preview comment does not show the head %s of #%d yet (GitHub has not taken its edit); nothing was %s. Once it names %s, review it and comment %s again.",
			cmd.User, head, cmd.PR, done, head, verb)
	}
	if !written.After(rec.HeadShownAt) {
		return fmt.Sprintf("ABORTED: @%s, your %s was written before the preview comment showed the head %s of #%d (GitHub dates your comment %s and the comment's edit %s; the same second counts as before); nothing was %s. Review %s and comment %s again.",
			cmd.User, verb, head, cmd.PR, written.UTC().Format(time.RFC3339), rec.HeadShownAt.UTC().Format(time.RFC3339), done, head, verb)
	}
	return ""
}

// holdNotice is the comment's paragraph on a non-writer's pull request
// whose head no writer approved: who may start it and which head, and
// what approving reveals (hiddenReadsNotice). Logins are written without
// "@": an edit of the comment must not notify anyone.
func holdNotice(rec PullRecord) string {
	if rec.Writer || !held(rec) || len(rec.ChangedPolicies) == 0 {
		return "" // nothing of it would run on live traffic
	}
	s := fmt.Sprintf("\n**Preview held.** %s may not write to this repository, so the rules of this pull request are not evaluated on live traffic until a user with write permission reviews head `%s` and comments `/reconciler preview start`.",
		mdText(rec.Author), short(rec.HeadCommit))
	if rec.ApprovedHead != "" && rec.ApprovedHead != rec.HeadCommit {
		s += fmt.Sprintf(" %s approved `%s`; that approval does not cover the new head.", mdText(rec.ApprovedBy), short(rec.ApprovedHead))
	}
	return s + "\n" + hiddenReadsNotice(rec.HiddenReads)
}
