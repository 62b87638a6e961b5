package github_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/forge"
)

// A rollback whose push to main is refused (a protected branch) is pushed
// to a branch and opened as a pull request "Revert to generation N (<sha>)".
func TestRollbackOpensPullRequestWhenPushRefused(t *testing.T) {
	e := newEnv(t)
	gen1 := e.git.Head("policies", "main")
	before := gen1
	after := e.git.Commit(e.work, map[string]string{"web/policy.toml": webPolicy("/admin")}, "deny admin")
	e.git.Push(e.work, "main")
	e.repo.SetRef("main", after)
	e.deliver(0, "push", must(e.repo.PushEvent("main", before, after)))
	e.allActive(2)
	e.gh.WaitStatus(after, forge.ContextPromote, forge.StateSuccess)

	e.git.RejectPushes("policies", "main", true)
	// A rollback sent twice rolls back twice: it is sent again only while
	// no leader took it (an election under load).
	code, data, err := client.DoRetryRefused(http.MethodPost, e.nodes[2].Base()+"/v1/generations:rollback", `{"waitSeconds":0}`)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("rollback: HTTP %d: %s", code, data)
	}
	var res struct {
		Commit, Revision, Message string
		PullRequestURL            string `json:"pullRequestUrl"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Revert to generation 1 (%s)", gen1)
	var found bool
	for _, p := range e.repo.Pulls() {
		if p.Title == want && p.State == "open" && p.BaseRef == "main" && p.HeadSHA == res.Commit &&
			strings.HasSuffix(res.PullRequestURL, fmt.Sprintf("/pull/%d", p.Number)) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no open pull request %q at %s; answer %s; pulls %+v", want, res.Commit, data, e.repo.Pulls())
	}
	if !strings.HasPrefix(res.Revision, "reconciler/revert-generation-1-") {
		t.Fatalf("revision %q is not on the revert branch", res.Revision)
	}
	if got := e.decide(0, "/admin"); got != "DENY" {
		t.Fatalf("the refused rollback changed the live policy: /admin is %s", got)
	}
}
