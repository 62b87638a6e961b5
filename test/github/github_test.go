// Package github_test runs the GitHub integration end to end: a real git
// server (internal/gittest), the GitHub emulator (internal/githubemu) whose
// merges push to that server, and a three-node cluster of in-process
// node.Main daemons with [github] configured.
package github_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
)

func TestPullRequestLifecycle(t *testing.T) {
	e := newEnv(t)
	if got := e.decide(0, "/admin"); got != "ALLOW" {
		t.Fatalf("before: /admin is %s", got)
	}

	// Open a pull request (webhook to a follower or the leader): one
	// comment, validate and preview statuses on its head.
	n, head1 := e.openPull("deny-admin", webPolicy("/admin"))
	e.waitStatus(head1, forge.ContextValidate, forge.StateSuccess)
	e.waitStatus(head1, forge.ContextPreview, forge.StateSuccess)
	var first githubemu.Comment
	eventually(t, "one preview comment", func() error {
		cs := e.markedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, head1[:12]) {
			return fmt.Errorf("%d comments", len(cs))
		}
		first = cs[0]
		return nil
	})
	etag1 := etagIn(t, first.Body)

	// Push to the pull request: the same comment, edited, with a new etag.
	head2 := e.pushPull(n, "deny-admin", webPolicy("/admin", "/secret"))
	e.waitStatus(head2, forge.ContextValidate, forge.StateSuccess)
	eventually(t, "the comment updated for the new head", func() error {
		cs := e.markedComments(n)
		if len(cs) != 1 || cs[0].ID != first.ID || !strings.Contains(cs[0].Body, head2[:12]) {
			return fmt.Errorf("%d comments: %+v", len(cs), cs)
		}
		if etagIn(t, cs[0].Body) == etag1 {
			return fmt.Errorf("same etag %s", etag1)
		}
		return nil
	})

	// A webhook with a bad signature: 401, and nothing happens.
	before := len(e.repo.Comments(n))
	payload, _, err := e.repo.CommentEvent(n, "alice", "/reconciler commit")
	if err != nil {
		t.Fatal(err)
	}
	d := e.emu.NewDelivery("issue_comment", payload)
	d.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	res, err := e.emu.Redeliver(e.hook(1), d)
	if err != nil || res.Status != http.StatusUnauthorized {
		t.Fatalf("bad signature: %v %+v", err, res)
	}
	time.Sleep(500 * time.Millisecond)
	if p, _ := e.repo.Pull(n); p.Merged || len(e.repo.Comments(n)) != before+1 { // +1: the comment itself
		t.Fatalf("a badly signed delivery changed something: merged %v, %d comments", p.Merged, len(e.repo.Comments(n)))
	}

	// A reader's /reconciler commit: refused politely, nothing merged.
	e.comment(n, "bob", "/reconciler commit")
	eventually(t, "a refusal", func() error {
		for _, c := range e.repo.Comments(n) {
			if strings.Contains(c.Body, "@bob, sorry") {
				return nil
			}
		}
		return fmt.Errorf("no refusal yet")
	})
	if p, _ := e.repo.Pull(n); p.Merged {
		t.Fatal("a reader's command merged the pull request")
	}
	if got := e.decide(0, "/admin"); got != "ALLOW" {
		t.Fatalf("after a refused commit: /admin is %s", got)
	}

	// A rate limit on comment edits: the edit is retried later; decisions
	// and promotion go on meanwhile.
	e.emu.Inject(githubemu.Fault{Kind: githubemu.TooManyRequests, Method: http.MethodPatch, Path: "/issues/comments/",
		RetryAfter: 2 * time.Second, Times: 2})
	head3 := e.pushPull(n, "deny-admin", webPolicy("/admin", "/secret", "/private"))
	if got := e.decide(1, "/admin"); got != "ALLOW" {
		t.Fatalf("during the rate limit: /admin is %s", got)
	}
	eventually(t, "the comment updated after the rate limit", func() error {
		cs := e.markedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, head3[:12]) {
			return fmt.Errorf("%d comments", len(cs))
		}
		return nil
	})
	if left := e.emu.PendingFaults(); left != 0 {
		t.Fatalf("%d injected faults left: the comment was not retried through them", left)
	}

	// A writer's commit while GitHub's head differs from the previewed one:
	// ABORTED (GitHub's 409), nothing merged.
	e.repo.UpdatePull(n, func(p *githubemu.Pull) { p.HeadSHA = strings.Repeat("a", 40) })
	e.comment(n, "alice", "/reconciler commit")
	eventually(t, "an ABORTED reply", func() error {
		for _, c := range e.repo.Comments(n) {
			if strings.HasPrefix(c.Body, "ABORTED") {
				return nil
			}
		}
		return fmt.Errorf("no ABORTED reply yet")
	})
	if p, _ := e.repo.Pull(n); p.Merged {
		t.Fatal("merged although the head moved")
	}
	e.repo.UpdatePull(n, func(p *githubemu.Pull) { p.HeadSHA = head3 })

	// A writer's /reconciler commit: merged at the previewed head, promoted
	// on every node, reconciler/promote success on the merge commit.
	e.comment(n, "alice", "/reconciler commit")
	var merge string
	eventually(t, "the pull request merged", func() error {
		p, _ := e.repo.Pull(n)
		if !p.Merged {
			return fmt.Errorf("not merged")
		}
		merge = p.MergeCommitSHA
		return nil
	})
	e.allActive(2)
	for i := range e.nodes {
		if got := e.decide(i, "/private"); got != "DENY" {
			t.Fatalf("node %d after the merge: /private is %s", i, got)
		}
	}
	s := e.waitStatus(merge, forge.ContextPromote, forge.StateSuccess)
	t.Logf("promote status on the merge commit: %q", s.Description)
}

// etagIn finds the experiment etag the comment shows.
func etagIn(t *testing.T, body string) string {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if i := strings.Index(strings.ToLower(line), "experiment etag"); i >= 0 {
			return line[i:]
		}
	}
	t.Fatalf("no experiment etag in the comment:\n%s", body)
	return ""
}
