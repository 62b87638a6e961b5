package forge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v60/github"
)

// Marker is the hidden first line of the preview comment: how the comment
// is found again after a restart or a change of leader.
const Marker = "<!-- reconciler:preview -->"

// maxCommentRunes is GitHub's limit on a comment body.
const maxCommentRunes = 65536

// truncated ends a body cut to fit.
const truncated = "\n\n…(truncated: the full summary is in the reconciler's API)"

// PostedComment is the preview comment as GitHub answered its create or
// edit (or listed it, when its body was already the one asked for).
type PostedComment struct {
	ID int64
	// UpdatedAt is GitHub's updated_at of the comment (GitHub's clock,
	// whole seconds): since then it has shown the body asked for.
	UpdatedAt time.Time
}

// cachedComment is the preview comment last written on a pull request.
type cachedComment struct {
	PostedComment
	body string
}

// UpsertComment makes body the pull request's one preview comment: it
// edits the comment in place, or creates it when there is none. The
// comment is found by Marker (added as the body's first line) by listing
// the comments, so a new leader finds the old leader's comment; it is then
// cached. Calls for the same pull request are serialized; a body equal to
// the cached one costs no request. After a failed create the comments are
// listed again before creating, so a lost answer never makes a second
// comment.
func (c *Client) UpsertComment(ctx context.Context, pr int, body string) (PostedComment, error) {
	return c.upsert(ctx, pr, body, false)
}

// ShowComment is UpsertComment without trusting the cache: it lists the
// comments first, so the answer's UpdatedAt is GitHub's word on since
// when the comment shows body, even when another leader edited it since
// this client last did. The leader dates a new head with it.
func (c *Client) ShowComment(ctx context.Context, pr int, body string) (PostedComment, error) {
	return c.upsert(ctx, pr, body, true)
}

// upsert is UpsertComment, listing first when fresh.
func (c *Client) upsert(ctx context.Context, pr int, body string, fresh bool) (PostedComment, error) {
	unlock, err := c.lockPR(ctx, pr)
	if err != nil {
		return PostedComment{}, errContext(fmt.Sprintf("update the comment on #%d", pr), err)
	}
	defer unlock()
	body = fitComment(Marker + "\n" + strings.TrimPrefix(body, Marker+"\n"))
	if fresh {
		c.forget(pr)
	} else if pc, done, err := c.editCached(ctx, pr, body); done || err != nil {
		return pc, err
	}
	for round := 1; ; round++ {
		listed, old, found, err := c.findMarked(ctx, pr)
		if err != nil {
			return PostedComment{}, err
		}
		pc := listed
		if found {
			pc, err = c.edit(ctx, pr, listed, old, body)
		} else {
			pc, err = c.create(ctx, pr, body)
		}
		if err == nil {
			c.remember(pr, pc, body)
			return pc, nil
		}
		// Deleted since listed, or the create's answer was lost: look again.
		again := (found && errors.Is(err, ErrNotFound)) || (!found && Retryable(err))
		if !again || round >= c.cfg.MaxAttempts {
			return PostedComment{}, err
		}
		if err := c.cfg.Sleep(ctx, c.backoff(round)); err != nil {
			return PostedComment{}, errContext(fmt.Sprintf("update the comment on #%d", pr), err)
		}
	}
}

// Comment posts a plain reply (a refusal, help) on pull request pr and
// returns its id. It is not repeated after a failure that may have reached
// GitHub, so it may fail with ErrUnavailable without posting twice.
func (c *Client) Comment(ctx context.Context, pr int, body string) (int64, error) {
	pc, err := c.create(ctx, pr, fitComment(body))
	return pc.ID, err
}

// lockPR serializes upserts on one pull request; it gives up when ctx ends.
func (c *Client) lockPR(ctx context.Context, pr int) (func(), error) {
	c.mu.Lock()
	ch := c.prLocks[pr]
	if ch == nil {
		ch = make(chan struct{}, 1)
		c.prLocks[pr] = ch
	}
	c.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// editCached edits the cached comment; done is false when there is no
// cached comment or it was deleted (the caller then lists).
func (c *Client) editCached(ctx context.Context, pr int, body string) (pc PostedComment, done bool, err error) {
	c.mu.Lock()
	cached, ok := c.comments[pr]
	c.mu.Unlock()
	if !ok {
		return pc, false, nil
	}
	pc, err = c.edit(ctx, pr, cached.PostedComment, cached.body, body)
	switch {
	case err == nil:
		c.remember(pr, pc, body)
		return pc, true, nil
	case errors.Is(err, ErrNotFound):
		c.forget(pr)
		c.log.Debug("preview comment gone; looking for it again", "pr", pr, "comment", cached.ID)
		return PostedComment{}, false, nil
	}
	return PostedComment{}, false, err
}

// remember caches the preview comment of pr.
func (c *Client) remember(pr int, pc PostedComment, body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.comments[pr] = cachedComment{PostedComment: pc, body: body}
}

// forget drops the cached comment of pr.
func (c *Client) forget(pr int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.comments, pr)
}

// findMarked lists every comment on pr and returns the oldest preview
// comment.
func (c *Client) findMarked(ctx context.Context, pr int) (pc PostedComment, body string, found bool, err error) {
	op := fmt.Sprintf("list comments on #%d", pr)
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	marked := 0
	for page := 0; page < maxPages; page++ {
		var list []*github.IssueComment
		var next int
		err = c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
			l, resp, err := gh.Issues.ListComments(ctx, c.owner, c.name, pr, opts)
			list, next = l, nextPage(resp)
			return resp, err
		})
		if err != nil {
			return PostedComment{}, "", false, err
		}
		for _, cm := range list {
			if isMarked(cm.GetBody()) {
				if marked++; marked == 1 {
					pc, body, found = posted(cm), cm.GetBody(), true
				}
			}
		}
		if next == 0 {
			break
		}
		opts.Page = next
	}
	if marked > 1 {
		c.log.Warn("several preview comments on a pull request; editing the oldest", "pr", pr, "count", marked)
	}
	return pc, body, found, nil
}

// isMarked reports whether a comment body's first line is Marker.
func isMarked(body string) bool {
	first, _, _ := strings.Cut(body, "\n")
	return strings.TrimSpace(first) == Marker
}

// posted is what a create, edit or list answer says of a comment.
func posted(cm *github.IssueComment) PostedComment {
	return PostedComment{ID: cm.GetID(), UpdatedAt: cm.GetUpdatedAt().Time}
}

// edit replaces comment was's body, unless it already is body (was is
// then the answer: the comment shows body since was.UpdatedAt).
func (c *Client) edit(ctx context.Context, pr int, was PostedComment, old, body string) (PostedComment, error) {
	if old == body {
		return was, nil
	}
	pc := was
	op := fmt.Sprintf("edit comment %d on #%d", was.ID, pr)
	err := c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
		cm, resp, err := gh.Issues.EditComment(ctx, c.owner, c.name, was.ID, &github.IssueComment{Body: &body})
		if err == nil {
			pc = posted(cm)
		}
		return resp, err
	})
	return pc, err
}

// create posts a new comment. Not idempotent: only rate limits are retried.
func (c *Client) create(ctx context.Context, pr int, body string) (PostedComment, error) {
	var pc PostedComment
	err := c.call(ctx, fmt.Sprintf("comment on #%d", pr), false, func(gh *github.Client) (*github.Response, error) {
		cm, resp, err := gh.Issues.CreateComment(ctx, c.owner, c.name, pr, &github.IssueComment{Body: &body})
		pc = posted(cm)
		return resp, err
	})
	return pc, err
}

// fitComment cuts a body to GitHub's limit: a last resort, since the
// preview comment is rendered within it (preview.RenderMarkdown). The cut
// falls at a line end when there is one, and closes a code block left
// open, so that the note after it is not shown as code.
func fitComment(body string) string {
	if utf8.RuneCountInString(body) <= maxCommentRunes {
		return body
	}
	const fence = "\n```"
	keep := string([]rune(body)[:maxCommentRunes-utf8.RuneCountInString(truncated+fence)])
	if i := strings.LastIndexByte(keep, '\n'); i > 0 {
		keep = keep[:i]
	}
	if openFence(keep) {
		keep += fence
	}
	return keep + truncated
}

// openFence reports whether body ends inside a ``` code block.
func openFence(body string) bool {
	open := false
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "```") {
			open = !open
		}
	}
	return open
}

// IssueComment is a pull request conversation comment as GitHub has it now.
type IssueComment struct {
	ID        int64
	PR        int // the pull request (issue) number, from issue_url
	User      string
	Body      string
	CreatedAt time.Time
}

// GetComment reads comment id as GitHub has it now: the leader checks a
// comment command against it (webhook.Command is only what some node was
// told). A deleted comment is ErrNotFound.
func (c *Client) GetComment(ctx context.Context, id int64) (IssueComment, error) {
	var cm *github.IssueComment
	err := c.call(ctx, fmt.Sprintf("get comment %d", id), true, func(gh *github.Client) (*github.Response, error) {
		got, resp, err := gh.Issues.GetComment(ctx, c.owner, c.name, id)
		cm = got
		return resp, err
	})
	if err != nil {
		return IssueComment{}, err
	}
	return IssueComment{ID: cm.GetID(), PR: issueNumber(cm.GetIssueURL()), User: cm.GetUser().GetLogin(),
		Body: cm.GetBody(), CreatedAt: cm.GetCreatedAt().Time}, nil
}

// issueNumber is the number ending an issue_url ("…/issues/12"), 0 when
// there is none.
func issueNumber(issueURL string) int {
	i := strings.LastIndexByte(issueURL, '/')
	n, err := strconv.Atoi(issueURL[i+1:])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
