package forge

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v60/github"
)

// maxPages bounds a paginated listing (100 items a page), so a broken
// Link header cannot loop forever.
const maxPages = 100

// OpenPullRequests lists the open pull requests into base (every base when
// empty), oldest first, all pages.
func (c *Client) OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error) {
	opts := &github.PullRequestListOptions{State: "open", Base: base, Sort: "created", Direction: "asc",
		ListOptions: github.ListOptions{PerPage: 100}}
	var out []PullRequest
	for page := 0; page < maxPages; page++ {
		var list []*github.PullRequest
		var next int
		err := c.call(ctx, "list pull requests", true, func(gh *github.Client) (*github.Response, error) {
			l, resp, err := gh.PullRequests.List(ctx, c.owner, c.name, opts)
			list, next = l, nextPage(resp)
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range list {
			out = append(out, pullFrom(p))
		}
		if next == 0 {
			return out, nil
		}
		opts.Page = next
	}
	return out, nil
}

// nextPage is the page go-github parsed from the Link header (0: last).
func nextPage(resp *github.Response) int {
	if resp == nil {
		return 0
	}
	return resp.NextPage
}

// PullRequest reads pull request n, including its merge state.
func (c *Client) PullRequest(ctx context.Context, n int) (PullRequest, error) {
	op := fmt.Sprintf("get pull request #%d", n)
	var p *github.PullRequest
	err := c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
		got, resp, err := gh.PullRequests.Get(ctx, c.owner, c.name, n)
		p = got
		return resp, err
	})
	if err != nil {
		return PullRequest{}, err
	}
	return pullFrom(p), nil
}

// ChangedFiles lists the paths pull request n changes (GitHub lists at
// most 3000).
func (c *Client) ChangedFiles(ctx context.Context, n int) ([]string, error) {
	op := fmt.Sprintf("list files of pull request #%d", n)
	opts := &github.ListOptions{PerPage: 100}
	var out []string
	for page := 0; page < maxPages; page++ {
		var next int
		err := c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
			files, resp, err := gh.PullRequests.ListFiles(ctx, c.owner, c.name, n, opts)
			next = nextPage(resp)
			for _, f := range files {
				out = append(out, f.GetFilename())
			}
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		if next == 0 {
			break
		}
		opts.Page = next
	}
	return out, nil
}

// Merge methods GitHub offers.
const (
	MergeMerge  = "merge"
	MergeSquash = "squash"
	MergeRebase = "rebase"
)

// Merge merges pull request pr if its head is still sha (the commit the
// experiment was evaluated at) and returns the merge commit's SHA. method
// is MergeMerge (default), MergeSquash or MergeRebase. A pull request that
// cannot be merged is ErrFailedPrecondition (HTTP 405); a head that moved
// is ErrAborted (409). A pull request already merged at sha (by someone
// else, or by an attempt whose answer was lost) is a success.
func (c *Client) Merge(ctx context.Context, pr int, sha, method string) (string, error) {
	op := fmt.Sprintf("merge pull request #%d", pr)
	if method == "" {
		method = MergeMerge
	}
	if sha == "" || (method != MergeMerge && method != MergeSquash && method != MergeRebase) {
		return "", &Error{Op: op, Kind: ErrInvalidArgument, Message: "a head SHA and merge, squash or rebase are needed"}
	}
	var res *github.PullRequestMergeResult
	err := c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
		r, resp, err := gh.PullRequests.Merge(ctx, c.owner, c.name, pr, "", &github.PullRequestOptions{SHA: sha, MergeMethod: method})
		res = r
		return resp, err
	})
	if errors.Is(err, ErrFailedPrecondition) {
		if p, perr := c.PullRequest(ctx, pr); perr == nil && p.Merged && p.HeadSHA == sha {
			return p.MergeCommitSHA, nil
		}
	}
	if err != nil {
		return "", err
	}
	return res.GetSHA(), nil
}

// CreatePullRequest opens a pull request from branch head into base (for a
// revert when pushing to base is refused) and returns it. If one is open
// already for head and base, that one is returned.
func (c *Client) CreatePullRequest(ctx context.Context, head, base, title, body string) (PullRequest, error) {
	op := fmt.Sprintf("open a pull request from %s into %s", head, base)
	np := &github.NewPullRequest{Title: &title, Head: &head, Base: &base, Body: &body}
	var p *github.PullRequest
	err := c.call(ctx, op, false, func(gh *github.Client) (*github.Response, error) {
		got, resp, err := gh.PullRequests.Create(ctx, c.owner, c.name, np)
		p = got
		return resp, err
	})
	if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrUnavailable) {
		// Already there, or the answer was lost after GitHub opened it.
		if found, ok, ferr := c.findOpen(ctx, head, base); ferr == nil && ok {
			return found, nil
		}
	}
	if err != nil {
		return PullRequest{}, err
	}
	return pullFrom(p), nil
}

// findOpen finds the open pull request from this repository's head into
// base.
func (c *Client) findOpen(ctx context.Context, head, base string) (PullRequest, bool, error) {
	opts := &github.PullRequestListOptions{State: "open", Head: c.owner + ":" + head, Base: base}
	var list []*github.PullRequest
	err := c.call(ctx, "find pull request from "+head, true, func(gh *github.Client) (*github.Response, error) {
		l, resp, err := gh.PullRequests.List(ctx, c.owner, c.name, opts)
		list = l
		return resp, err
	})
	if err != nil || len(list) == 0 {
		return PullRequest{}, false, err
	}
	return pullFrom(list[0]), true, nil
}
