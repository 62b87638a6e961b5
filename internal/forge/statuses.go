package forge

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/go-github/v60/github"
)

// Status contexts the reconciler sets on commits (CONTRACT §5).
const (
	// ContextValidate: the pull request's policies parse, merge, compile
	// and pass their tests.
	ContextValidate = "reconciler/validate"
	// ContextPreview: the experiment's preview on live traffic.
	ContextPreview = "reconciler/preview"
	// ContextPromote: a main commit became (or failed to become) a
	// generation.
	ContextPromote = "reconciler/promote"
)

// Commit status states.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// maxDescription is GitHub's limit on a status description, in characters.
const maxDescription = 140

// SetStatus sets the commit status statusContext (one of the Context
// constants) on sha. description is trimmed
// to GitHub's 140 characters; targetURL may be empty. Setting the same
// status again is harmless, so failures that may have reached GitHub are
// retried.
func (c *Client) SetStatus(ctx context.Context, sha, statusContext, state, description, targetURL string) error {
	op := fmt.Sprintf("set status %s on %.12s", statusContext, sha)
	if sha == "" || statusContext == "" {
		return &Error{Op: op, Kind: ErrInvalidArgument, Message: "a commit SHA and a context are needed"}
	}
	switch state {
	case StatePending, StateSuccess, StateFailure, StateError:
	default:
		return &Error{Op: op, Kind: ErrInvalidArgument, Message: fmt.Sprintf("unknown state %q", state)}
	}
	st := &github.RepoStatus{State: &state, Context: &statusContext, Description: github.String(fitDescription(description))}
	if targetURL != "" {
		st.TargetURL = &targetURL
	}
	return c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
		_, resp, err := gh.Repositories.CreateStatus(ctx, c.owner, c.name, sha, st)
		return resp, err
	})
}

// fitDescription puts a description on one line of at most 140 characters.
func fitDescription(d string) string {
	d = strings.Join(strings.Fields(d), " ")
	if utf8.RuneCountInString(d) <= maxDescription {
		return d
	}
	return string([]rune(d)[:maxDescription-1]) + "…"
}

// Repository permission levels, weakest first. "none" is what a user
// without access has.
const (
	PermNone     = "none"
	PermRead     = "read"
	PermTriage   = "triage"
	PermWrite    = "write"
	PermMaintain = "maintain"
	PermAdmin    = "admin"
)

// roles are the levels role_name may carry.
var roles = map[string]bool{PermNone: true, PermRead: true, PermTriage: true, PermWrite: true, PermMaintain: true, PermAdmin: true}

// permissionLevel is the collaborator permission answer with role_name,
// which go-github v60's RepositoryPermissionLevel does not map. The legacy
// "permission" reads maintain as write and triage as read.
type permissionLevel struct {
	Permission string `json:"permission"`
	RoleName   string `json:"role_name"`
}

// Permission returns user's permission level on the repository: one of the
// Perm constants (a custom role reports its base level). Comment commands
// must be authorized with it, never with a webhook's author_association.
// A user GitHub does not know has PermNone.
func (c *Client) Permission(ctx context.Context, user string) (string, error) {
	op := fmt.Sprintf("get the permission of %q", user)
	if user == "" || strings.ContainsAny(user, "/?#% ") {
		return "", &Error{Op: op, Kind: ErrInvalidArgument, Message: "not a GitHub login"}
	}
	var lvl permissionLevel
	u := fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", c.owner, c.name, url.PathEscape(user))
	err := c.call(ctx, op, true, func(gh *github.Client) (*github.Response, error) {
		req, err := gh.NewRequest("GET", u, nil)
		if err != nil {
			return nil, err
		}
		lvl = permissionLevel{}
		return gh.Do(ctx, req, &lvl)
	})
	if errors.Is(err, ErrNotFound) {
		return PermNone, nil
	}
	if err != nil {
		return "", err
	}
	if r := strings.ToLower(lvl.RoleName); roles[r] {
		return r, nil
	}
	if p := strings.ToLower(lvl.Permission); roles[p] {
		return p, nil
	}
	return PermNone, nil
}

// CanWrite reports whether a permission level may run comment commands:
// write, maintain or admin.
func CanWrite(perm string) bool {
	switch perm {
	case PermWrite, PermMaintain, PermAdmin:
		return true
	}
	return false
}
