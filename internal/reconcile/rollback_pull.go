package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/policyrollout/reconciler/internal/gitsource"
)

// branchPusher is a Source that can push a commit to a new branch
// (gitsource.Source.PushBranch).
type branchPusher interface {
	PushBranch(ctx context.Context, hash, branch string) error
}

// refusedError is a rollback whose push to the live branch was refused:
// its message says what to do, and it keeps the refusal (with the revert
// commit) for revertAsPull.
type refusedError struct {
	msg     string
	refused *gitsource.PushRefusedError
}

func (e *refusedError) Error() string { return e.msg }

func (e *refusedError) Unwrap() error { return e.refused }

// revertAsPull opens the pull request a refused rollback becomes with
// [github] (CONTRACT.md §5): the revert commit is pushed to the branch
// "reconciler/revert-generation-N" and a pull request "Revert to
// generation N (<sha>)" into the live branch is opened (or the open one
// found). ok is false when err is not a refused push or there is no
// GitHub or no way to push a branch; the caller then returns err.
func (r *Rollbacks) revertAsPull(ctx context.Context, res RollbackResult, err error) (RollbackResult, bool, error) {
	var refused *refusedError
	pusher, canPush := r.cfg.Source.(branchPusher)
	if r.cfg.PullRequests == nil || !canPush || !errors.As(err, &refused) || refused.refused.Commit == "" {
		return res, false, nil
	}
	commit := refused.refused.Commit
	branch := fmt.Sprintf("reconciler/revert-generation-%d-%s", res.Target, shortHash(commit))
	if perr := pusher.PushBranch(ctx, commit, branch); perr != nil {
		return res, true, fmt.Errorf("%w; pushing the revert to the branch %s failed too: %w", err, branch, perr)
	}
	body := fmt.Sprintf("%s\n\nThe push of this revert to `%s` was refused (%s), so the reconciler opened this pull request instead. Merging it promotes the revert as a new generation.",
		res.Message, r.cfg.Branch, refused.refused.Message)
	pr, perr := r.cfg.PullRequests.CreatePullRequest(ctx, branch, r.cfg.Branch, res.Message, body)
	if perr != nil {
		return res, true, fmt.Errorf("%w; the revert is on the branch %s but opening its pull request failed: %w", err, branch, perr)
	}
	res.Commit, res.Revision = commit, gitsource.Revision{Ref: branch, Hash: commit}.String()
	res.PullRequestURL = pr.URL
	r.log.Info("rollback opened as a pull request", "url", pr.URL, "branch", branch, "to_generation", res.Target)
	return res, true, nil
}

// shortHash is the first 12 hex digits of a commit, for branch names.
func shortHash(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
