package githubemu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"
)

// TestCommentBodyLimit: like GitHub, a comment create or edit over 65,536
// characters (Unicode code points, not bytes) is 422 "Body is too long";
// one of exactly 65,536 is accepted.
func TestCommentBodyLimit(t *testing.T) {
	_, r, gh := setup(t)
	ctx := context.Background()
	n := r.OpenPull(Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	fits := strings.Repeat("é", MaxCommentBody) // 131,072 bytes
	c, _, err := gh.Issues.CreateComment(ctx, "o", "r", n, &github.IssueComment{Body: &fits})
	if err != nil {
		t.Fatalf("create of %d characters: %v", MaxCommentBody, err)
	}
	long := fits + "x"
	if _, _, err := gh.Issues.CreateComment(ctx, "o", "r", n, &github.IssueComment{Body: &long}); !tooLong(err) {
		t.Errorf("create of %d characters: %v, want 422 Body is too long", MaxCommentBody+1, err)
	}
	if _, _, err := gh.Issues.EditComment(ctx, "o", "r", c.GetID(), &github.IssueComment{Body: &long}); !tooLong(err) {
		t.Errorf("edit to %d characters: %v, want 422 Body is too long", MaxCommentBody+1, err)
	}
	if got := r.Comments(n); len(got) != 1 || got[0].Body != fits {
		t.Errorf("the refused edit changed the comment (%d comments)", len(got))
	}
}

func tooLong(err error) bool {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || len(er.Errors) != 1 {
		return false
	}
	return strings.HasPrefix(er.Errors[0].Message, "Body is too long")
}
