// Package github_test runs the GitHub integration end to end: a real git
// server (internal/gittest), the GitHub emulator (internal/githubemu) whose
// merges push to that server, and a three-node cluster of real
// `reconciler serve` processes (test/harness) with [github] configured.
package github_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/test/harness"
)

func TestPullRequestLifecycle(t *testing.T) {
	e := newEnv(t)
	if got := e.decide(0, "/admin"); got != "ALLOW" {
		t.Fatalf("before: /admin is %s", got)
	}

	// Open a pull request (webhook to a follower or the leader): one
	// comment, validate and preview statuses on its head.
	n, head1 := e.openPull("deny-admin", webPolicy("/admin"))
	e.gh.WaitStatus(head1, forge.ContextValidate, forge.StateSuccess)
	e.gh.WaitStatus(head1, forge.ContextPreview, forge.StateSuccess)
	var first githubemu.Comment
	eventually(t, "one preview comment", func() error {
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, head1[:12]) {
			return fmt.Errorf("%d comments", len(cs))
		}
		first = cs[0]
		return nil
	})
	etag1 := etagIn(t, first.Body)

	// Push to the pull request: the same comment, edited, with a new etag.
	head2 := e.pushPull(n, "deny-admin", webPolicy("/admin", "/secret"))
	e.gh.WaitStatus(head2, forge.ContextValidate, forge.StateSuccess)
	eventually(t, "the comment updated for the new head", func() error {
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || cs[0].ID != first.ID || !strings.Contains(cs[0].Body, head2[:12]) {
			return fmt.Errorf("%d comments: %+v", len(cs), cs)
		}
		if etagIn(t, cs[0].Body) == etag1 {
			return fmt.Errorf("same etag %s", etag1)
		}
		return nil
	})
	// The update suspended the experiment (stop_time) and auto-start
	// started it again (a later start_time): logs of the versions stay apart.
	e.waitCycledThroughSuspended(fmt.Sprintf("/v1/policies/web/experiments/pr-%d", n), head2)

	// Mutations need the [api] token, also on GitHub's experiments.
	code, body, err := anonymous.Do(http.MethodPost,
		e.nodes[1].Base()+fmt.Sprintf("/v1/policies/web/experiments/pr-%d:stopPreview", n), "{}")
	if err != nil || code != http.StatusUnauthorized {
		t.Fatalf("stopPreview without the token: %d %s %v", code, body, err)
	}

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
		cs := e.gh.MarkedComments(n)
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

	// A writer's /reconciler commit on the comment showing head3: merged
	// at the previewed head, promoted on every node, reconciler/promote
	// success on the merge commit.
	e.afterShown(n)
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
	s := e.gh.WaitStatus(merge, forge.ContextPromote, forge.StateSuccess)
	t.Logf("promote status on the merge commit: %q", s.Description)

	// A second pull request, committed through the HTTP API (on a
	// follower, forwarded to the leader) as /reconciler commit does.
	n2, head4 := e.openPull("deny-public", webPolicy("/admin", "/secret", "/private", "/public"))
	e.gh.WaitStatus(head4, forge.ContextPreview, forge.StateSuccess)
	exp := fmt.Sprintf("/v1/policies/web/experiments/pr-%d", n2)
	var got harness.Experiment
	eventually(t, "the experiment at the new head", func() error {
		if err := client.GetJSON(e.nodes[1].Base()+exp, &got); err != nil {
			return err
		}
		if got.Source.HeadCommit != head4 {
			return fmt.Errorf("experiment %+v", got)
		}
		return nil
	})
	commit := func(etag string) (int, []byte) {
		code, data, err := client.DoRetry(http.MethodPost, e.nodes[1].Base()+exp+":commit", fmt.Sprintf(`{"etag":%q}`, etag))
		if err != nil {
			t.Fatal(err)
		}
		return code, data
	}
	// A stale etag, then a head GitHub moved: ABORTED, nothing merged.
	if code, body := commit(`"stale"`); code != http.StatusConflict || !strings.Contains(string(body), "ABORTED") {
		t.Fatalf("stale etag: %d %s", code, body)
	}
	e.repo.UpdatePull(n2, func(p *githubemu.Pull) { p.HeadSHA = strings.Repeat("b", 40) })
	if code, body := commit(got.Etag); code != http.StatusConflict || !strings.Contains(string(body), "ABORTED") {
		t.Fatalf("moved head: %d %s", code, body)
	}
	if p, _ := e.repo.Pull(n2); p.Merged {
		t.Fatal("merged although the head moved")
	}
	e.repo.UpdatePull(n2, func(p *githubemu.Pull) { p.HeadSHA = head4 })
	code, body = commit(got.Etag)
	if code != http.StatusOK {
		t.Fatalf("commit: %d %s", code, body)
	}
	var op harness.Operation
	if err := json.Unmarshal(body, &op); err != nil || op.Name == "" {
		t.Fatalf("operation %s: %v", body, err)
	}
	if p, _ := e.repo.Pull(n2); !p.Merged {
		t.Fatal("the commit did not merge the pull request")
	}
	eventually(t, "the commit operation done", func() error {
		if err := client.GetJSON(e.nodes[2].Base()+"/v1/"+op.Name, &op); err != nil {
			return err
		}
		if !op.Done {
			return fmt.Errorf("not done")
		}
		return nil
	})
	if op.Error != nil {
		t.Fatalf("commit operation failed: %+v", op.Error)
	}
	e.allActive(3)
	if got := e.decide(0, "/public"); got != "DENY" {
		t.Fatalf("after the API commit: /public is %s", got)
	}
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

// [preview.thresholds]: an experiment changing more live-mirrored
// decisions than its policy allows shows a failing summary on the API and
// sets reconciler/preview to failure with the one-line reason.
func TestPreviewThresholdFailsPullRequest(t *testing.T) {
	e := newEnvWith(t, `
[preview.thresholds."*"]
max_allow_to_deny_ratio = 0.0

[preview.thresholds.web]
max_allow_to_deny_ratio = 0.2
`)
	n, head := e.openPull("deny-admin", webPolicy("/admin"))
	e.gh.WaitStatus(head, forge.ContextPreview, forge.StateSuccess)
	exp := fmt.Sprintf("%s/v1/policies/web/experiments/pr-%d", e.nodes[1].Base(), n)
	var v harness.Experiment
	eventually(t, "the experiment previewing the head", func() error {
		if err := client.GetJSON(exp, &v); err != nil {
			return err
		}
		if v.Source.HeadCommit != head || v.Summary == nil || v.Summary.Failing {
			return fmt.Errorf("experiment %+v", v)
		}
		return nil
	})
	// Half of the mirrored requests turn ALLOW→DENY: over 0.2. They carry
	// credentials that [preview] redact covers by default.
	const secretAuth, secretCookie = "Bearer live-user-secret-4711", "session=live-cookie-secret-0815"
	for i := range e.nodes {
		for _, p := range []string{"/admin", "/", "/admin", "/x"} {
			req := fmt.Sprintf(`{"path":%q,"headers":{"authorization":%q,"cookie":%q}}`, p, secretAuth, secretCookie)
			if got := e.decideRequest(i, req); got != "ALLOW" {
				t.Fatalf("live decision on %s changed: %s", p, got)
			}
		}
	}
	s := e.gh.WaitStatus(head, forge.ContextPreview, forge.StateFailure)
	if !strings.Contains(s.Description, "ALLOW→DENY") || !strings.Contains(s.Description, "max_allow_to_deny_ratio 0.2") ||
		strings.Contains(s.Description, "\n") {
		t.Fatalf("reconciler/preview description %q", s.Description)
	}
	eventually(t, "a failing summary on the API", func() error {
		if err := client.GetJSON(exp, &v); err != nil {
			return err
		}
		if v.Summary == nil || !v.Summary.Failing || !strings.Contains(v.Summary.Reason, "max_allow_to_deny_ratio") {
			return fmt.Errorf("experiment %+v", v)
		}
		return nil
	})

	// The comment shows sample diffs of those requests, redacted: no
	// credential of a live request reaches GitHub.
	eventually(t, "a comment with the redacted samples", func() error {
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, "/admin") || !strings.Contains(cs[0].Body, "REDACTED") {
			return fmt.Errorf("comments %+v", cs)
		}
		return nil
	})
	for _, c := range e.repo.Comments(n) {
		for _, secret := range []string{"live-user-secret-4711", "live-cookie-secret-0815"} {
			if strings.Contains(c.Body, secret) {
				t.Fatalf("a comment on GitHub carries a live request's credential:\n%s", c.Body)
			}
		}
	}
	for _, st := range e.repo.Statuses(head) {
		if strings.Contains(st.Description, "secret-") {
			t.Fatalf("a status carries a live request's credential: %q", st.Description)
		}
	}
}

// waitCycledThroughSuspended waits until the experiment at path previews
// head ACTIVE again after an update suspended it: stop_time set by the
// update, start_time after it.
func (e *env) waitCycledThroughSuspended(path, head string) {
	e.t.Helper()
	var v harness.Experiment
	eventually(e.t, "the experiment cycled through SUSPENDED", func() error {
		if err := client.GetJSON(e.nodes[0].Base()+path, &v); err != nil {
			return err
		}
		m := v.PreviewMetadata
		if v.Source.HeadCommit != head || m.State != "ACTIVE" || m.StopTime.IsZero() || m.StartTime.Before(m.StopTime) {
			return fmt.Errorf("experiment %+v", v)
		}
		return nil
	})
}
