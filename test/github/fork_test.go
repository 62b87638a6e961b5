package github_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/test/harness"
)

// Issue 16: a writer's approval of a fork's pull request covers the head
// the writer saw. bob (read permission) opens a pull request from his
// fork: held. alice approves: previewed. bob pushes a rule testing a
// hidden header: the experiment stops on every node, the comment and
// reconciler/preview say a writer must approve the new head, and the
// comment names the hidden value the rule reads; alice approves it:
// previewed again.
func TestForkPushAfterApprovalIsHeld(t *testing.T) {
	e := newEnv(t)
	n, head1 := e.openFork("fork", webPolicy("/admin"))
	exp := fmt.Sprintf("/v1/policies/web/experiments/pr-%d", n)
	e.waitHeld(n, exp, head1)

	e.approve(n, exp, head1)
	// bob's push adds a rule whose count tells how many live API keys
	// begin "LIVE-A": held, and the comment names the value it reads.
	oracle := webPolicy("/admin") + "\n[[rules]]\nname = \"oracle\"\npriority = 9\naction = \"deny\"\n" +
		"match = '\"x-api-key\" in request.headers && request.headers[\"x-api-key\"].startsWith(\"LIVE-A\")'\n"
	head2 := e.pushFork(n, "fork", oracle)
	e.waitHeld(n, exp, head2)
	c := e.gh.MarkedComments(n)
	if !strings.Contains(c[0].Body, "approved `"+head1[:12]+"`; that approval does not cover the new head") {
		t.Fatalf("the comment does not say the approval was for the old head:\n%s", c[0].Body)
	}
	if !strings.Contains(c[0].Body, "Approving reveals per-rule counts") || !strings.Contains(c[0].Body, "- `headers.x-api-key`") {
		t.Fatalf("the comment does not name the hidden value the new rule reads:\n%s", c[0].Body)
	}
	e.approve(n, exp, head2)
}

// openFork pushes branch with web at policy as bob's fork would and opens
// pull request #n from it; it returns the head commit.
func (e *env) openFork(branch, policy string) (int, string) {
	e.git.CreateBranch(e.work, branch)
	head := e.git.Commit(e.work, map[string]string{"web/policy.toml": policy}, "change web")
	e.git.Push(e.work, branch)
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: branch, HeadRepo: "bob/policies", HeadSHA: head, BaseRef: "main", Author: "bob"})
	e.git.SetRef("policies", fmt.Sprintf("refs/pull/%d/head", n), head)
	e.deliver(1, "pull_request", must(e.repo.PullRequestEvent("opened", n)))
	return n, head
}

// pushFork pushes a new version to the fork's pull request.
func (e *env) pushFork(n int, branch, policy string) string {
	e.git.Checkout(e.work, branch)
	head := e.git.Commit(e.work, map[string]string{"web/policy.toml": policy}, "change web again")
	e.git.Push(e.work, branch)
	e.git.SetRef("policies", fmt.Sprintf("refs/pull/%d/head", n), head)
	e.repo.UpdatePull(n, func(p *githubemu.Pull) { p.HeadSHA = head })
	e.deliver(e.via, "pull_request", must(e.repo.PullRequestEvent("synchronize", n)))
	return head
}

// waitHeld waits until pull request n's experiment is at head and not
// previewed, and its comment and reconciler/preview status ask a writer
// to approve head.
func (e *env) waitHeld(n int, exp, head string) {
	e.t.Helper()
	e.gh.WaitStatus(head, forge.ContextPreview, forge.StatePending)
	eventually(e.t, "the comment asking for an approval of "+head[:12], func() error {
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, "Preview held") || !strings.Contains(cs[0].Body, "head `"+head[:12]+"`") {
			return fmt.Errorf("comments %+v", cs)
		}
		return nil
	})
	for _, node := range e.nodes { // every running node's copy of the replicated experiment
		if !node.Running() {
			continue
		}
		eventually(e.t, "the experiment held at "+head[:12]+" on "+node.ID, func() error {
			var v harness.Experiment
			if err := client.GetJSON(node.Base()+exp, &v); err != nil {
				return err
			}
			if v.Source.HeadCommit != head || v.PreviewMetadata.State == "ACTIVE" {
				return fmt.Errorf("experiment %+v", v)
			}
			return nil
		})
	}
}

// approve is alice commenting /reconciler preview start on the held
// comment (waitHeld), and the experiment running at head.
func (e *env) approve(n int, exp, head string) {
	e.t.Helper()
	e.afterShown(n)
	e.comment(n, "alice", "/reconciler preview start")
	eventually(e.t, "alice's approval of "+head[:12], func() error {
		var v harness.Experiment
		if err := client.GetJSON(e.nodes[e.via].Base()+exp, &v); err != nil {
			return err
		}
		r := e.replies(n)
		if v.Source.HeadCommit != head || v.PreviewMetadata.State != "ACTIVE" || len(r) == 0 ||
			!strings.Contains(r[len(r)-1], "is ACTIVE at "+head[:12]+", approved by @alice") {
			return fmt.Errorf("experiment %+v; replies %q", v, r)
		}
		return nil
	})
}

// afterShown waits until a comment written now is dated, by GitHub, after
// the preview comment of pull request n showed its head. The leader binds
// a command to the head only when GitHub dates it strictly after the edit
// that first showed the head (whole seconds: the same second counts as
// before), and it recorded that edit's date before it takes the next
// command. The comment's last edit is no earlier than that one, so the
// second after it will do, and one comment must.
func (e *env) afterShown(n int) {
	e.t.Helper()
	shown := e.gh.MarkedComments(n)[0]
	time.Sleep(time.Until(shown.UpdatedAt.Truncate(time.Second).Add(time.Second)))
}

// replies are the bot's replies on pull request n.
func (e *env) replies(n int) []string {
	var out []string
	for _, c := range e.repo.Comments(n) {
		if c.User != "alice" && c.User != "bob" && !strings.HasPrefix(c.Body, forge.Marker+"\n") {
			out = append(out, c.Body)
		}
	}
	return out
}

// A writer's approval is in the replicated record: after the leader's
// process is killed, the new leader keeps the approved preview as it was
// (its first passes, before GitHub lets it list the pull requests, used
// to delete the experiment and create it again), holds bob's next push,
// and takes alice's approval of it.
func TestForkApprovalSurvivesLeaderChange(t *testing.T) {
	e := newEnv(t)
	n, head1 := e.openFork("fork", webPolicy("/admin"))
	exp := fmt.Sprintf("/v1/policies/web/experiments/pr-%d", n)
	e.waitHeld(n, exp, head1)
	e.approve(n, exp, head1)
	var before harness.Experiment
	if err := client.GetJSON(e.nodes[e.via].Base()+exp, &before); err != nil {
		t.Fatal(err)
	}

	old := e.cluster.WaitLeader(waitLimit)
	old.Kill()
	// GitHub fails the new leader's first listings of the pull requests,
	// so its first passes run before it knows them.
	e.emu.Inject(githubemu.Fault{Kind: githubemu.ServerError, Method: "GET", Path: "/pulls", Times: 4})
	e.via = (slices.Index(e.nodes, old) + 1) % len(e.nodes)
	e.cluster.WaitLeader(waitLimit)
	head2 := e.pushFork(n, "fork", webPolicy("/admin", "/secret"))
	e.waitHeld(n, exp, head2)
	var after harness.Experiment
	if err := client.GetJSON(e.nodes[e.via].Base()+exp, &after); err != nil {
		t.Fatal(err)
	}
	if !after.PreviewMetadata.StartTime.Equal(before.PreviewMetadata.StartTime) {
		t.Fatalf("the new leader made the experiment again: started %v, before %v",
			after.PreviewMetadata.StartTime, before.PreviewMetadata.StartTime)
	}
	e.approve(n, exp, head2)
}
