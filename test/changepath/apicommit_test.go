package changepath_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// soloPolicy is a policy in one file, with two tests.
const soloPolicy = `# solo: one file, two tests
default_action = "deny"

[[rules]]
name = "allow-get"
priority = 100
action = "allow"
match = "request.method == 'GET'"

[[tests]]
name = "get is allowed"
request = { method = "GET", path = "/" }
expect = "allow"

[[tests]]
name = "post is denied"
request = { method = "POST", path = "/" }
expect = "deny"
`

// Issue 24, findings 1 and 2, through the API of three real nodes: an
// API commit of an example policy writes only what changed; a body
// without tests keeps the policy's tests, which run against the
// experiment (its view counts them, and a failing one refuses the
// commit); removing tests takes "tests": [] and the commit says how many.
func TestAPICommitKeepsFilesAndTests(t *testing.T) {
	files := harness.ExampleFiles(t)
	files["solo/policy.toml"] = soloPolicy
	e := startWith(t, files, "")
	repo := e.srv.RepoPath("policies")

	// Finding 1 as reported: GET admin-api, append a rule, post, commit.
	p := e.policyJSON("admin-api")
	liveTests := len(p["tests"].([]any))
	p["rules"] = append(p["rules"].([]any), map[string]any{"name": "deny-e2", "priority": 95, "action": "deny",
		"match": "request.path == '/e2'"})
	x := e.create("admin-api", "e2", `{"policy":`+mustJSON(p)+`}`)
	if v := x.Validation; v == nil || !v.Valid || v.Tests == nil || v.Tests.Total != liveTests || v.Tests.Passed != liveTests {
		t.Fatalf("validation of e2 %+v, want all %d tests passing", v, liveTests)
	}
	before := e.srv.Head("policies", "main")
	o := e.commit(x.Name, x.Etag)
	if o.Error != nil || o.Metadata.TestsRemoved == nil || *o.Metadata.TestsRemoved != 0 {
		t.Fatalf("commit of e2: %+v (testsRemoved %v)", o.Error, o.Metadata.TestsRemoved)
	}
	if got := e.srv.Git(repo, "diff", "--name-only", before, "main"); got != "admin-api/policy.toml" {
		t.Errorf("committing e2 changed %q, want admin-api/policy.toml alone", got)
	}
	if got := e.srv.Git(repo, "diff", "--numstat", before, "main"); !strings.HasSuffix(got, "\t0\tadmin-api/policy.toml") {
		t.Errorf("committing e2 removed lines: %s", got)
	}
	e.waitActive(2)

	// Finding 2: a body with rules only keeps both tests of solo.
	rules := `[{"name":"allow-get","priority":100,"action":"allow","match":"request.method in ['GET', 'HEAD']"}]`
	x = e.create("solo", "rules-only", `{"policy":{"default_action":"deny","rules":`+rules+`}}`)
	if v := x.Validation; v == nil || !v.Valid || v.Tests == nil || v.Tests.Total != 2 || v.Tests.Passed != 2 {
		t.Fatalf("validation of rules-only %+v, want 2 of 2 tests passing", x.Validation)
	}
	if o := e.commit(x.Name, x.Etag); o.Error != nil || *o.Metadata.TestsRemoved != 0 {
		t.Fatalf("commit of rules-only: %+v", o)
	}
	if got := e.mainFile("solo/policy.toml"); strings.Count(got, "[[tests]]") != 2 || !strings.HasPrefix(got, "# solo") {
		t.Errorf("solo/policy.toml after a rules-only commit:\n%s", got)
	}
	e.waitActive(3)

	// A rule that fails a live test: the view says so, the commit is refused.
	rules = `[{"name":"allow-get","priority":100,"action":"allow","match":"request.method != ''"}]`
	x = e.create("solo", "breaks", `{"policy":{"default_action":"deny","rules":`+rules+`}}`)
	if v := x.Validation; v == nil || v.Valid || v.Tests == nil || v.Tests.Passed != 1 || v.Tests.Total != 2 {
		t.Fatalf("validation of breaks %+v, want 1 of 2 tests passing", x.Validation)
	}
	before = e.srv.Head("policies", "main")
	if o := e.commit(x.Name, x.Etag); o.Error == nil || o.Error.Status != "FAILED_PRECONDITION" ||
		!strings.Contains(o.Error.Message, "solo/policy.toml") || !strings.Contains(o.Error.Message, "post is denied") {
		t.Fatalf("commit of a policy failing a live test: %+v", o.Error)
	}
	if got := e.srv.Head("policies", "main"); got != before {
		t.Fatalf("main moved to %s", got)
	}

	// Removing tests takes "tests": [], and the commit counts them.
	x = e.create("solo", "no-tests", `{"policy":{"default_action":"deny","rules":`+rules+`,"tests":[]}}`)
	if v := x.Validation; v == nil || !v.Valid || v.Tests == nil || v.Tests.Total != 0 {
		t.Fatalf("validation of no-tests %+v", x.Validation)
	}
	o = e.commit(x.Name, x.Etag)
	if o.Error != nil || o.Metadata.TestsRemoved == nil || *o.Metadata.TestsRemoved != 2 {
		t.Fatalf("commit of no-tests: %+v (testsRemoved %v)", o.Error, o.Metadata.TestsRemoved)
	}
	if got := e.mainFile("solo/policy.toml"); strings.Contains(got, "[[tests]]") || !strings.HasPrefix(got, "# solo") {
		t.Errorf("solo/policy.toml after removing its tests:\n%s", got)
	}
}

// create posts an experiment and returns it as stored.
func (e *env) create(pol, id, body string) experiment {
	e.t.Helper()
	if o := e.op(http.MethodPost, fmt.Sprintf("/v1/policies/%s/experiments?experimentId=%s", pol, id), body); o.Error != nil {
		e.t.Fatalf("create %s/%s: %+v", pol, id, o.Error)
	}
	x, code := e.experiment(fmt.Sprintf("policies/%s/experiments/%s", pol, id))
	if code != http.StatusOK {
		e.t.Fatalf("GET %s/%s: %d", pol, id, code)
	}
	return x
}
