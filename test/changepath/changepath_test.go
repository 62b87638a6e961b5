package changepath_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/gittest"
)

// The policy "web" with allow-get turned into a deny: it compiles, and
// fails web's own test "get is allowed".
const failingWeb = `{"policy":{"default_action":"deny","rules":[{"name":"allow-get","priority":100,"action":"deny",
"match":"request.method == 'GET'"}],"tests":[{"name":"get is allowed","request":{"method":"GET","path":"/"},"expect":"allow"}]}}`

// Issue 14, failure 1: a commit whose tree fails a policy test is refused
// before anything is pushed; the experiment keeps previewing, main and the
// live generation stay, and the next valid commit is not poisoned.
func TestFailedCommitChangesNothing(t *testing.T) {
	e := start(t, "")
	o := e.op(http.MethodPost, "/v1/policies/web/experiments?experimentId=flip", failingWeb)
	if o.Error != nil {
		t.Fatalf("create: %+v", o.Error)
	}
	x, _ := e.experiment("policies/web/experiments/flip")
	if x.Validation == nil || x.Validation.Valid || !strings.Contains(strings.Join(x.Validation.Errors, "\n"), "get is allowed") {
		t.Errorf("the experiment does not show that it fails its test: %+v", x.Validation)
	}
	var st apiv1.Status
	e.call(1, http.MethodGet, "/v1/status", "", &st)
	for _, row := range st.Experiments {
		if s := row.Experiment; s != nil && s.Name == x.Name && (s.Valid == nil || *s.Valid) {
			t.Errorf("the status summary does not show the experiment invalid: %+v", s)
		}
	}
	head, gens := e.srv.Head("policies", "main"), e.generations()

	o = e.commit(x.Name, x.Etag)
	if o.Error == nil || o.Error.Status != "FAILED_PRECONDITION" || !strings.Contains(o.Error.Message, "get is allowed") {
		t.Fatalf("commit of a failing experiment: %+v", o.Error)
	}
	if got := e.srv.Head("policies", "main"); got != head {
		t.Fatalf("main moved to %s", got)
	}
	after, code := e.experiment(x.Name)
	if code != 200 || after.Etag != x.Etag || after.PreviewMetadata == nil || after.PreviewMetadata.State != "ACTIVE" {
		t.Fatalf("the experiment changed: %d %+v", code, after)
	}
	e.reconcile()
	if now := e.generations(); len(now) != len(gens) {
		t.Fatalf("generations %+v, want still %+v", now, gens)
	}

	// The next, valid commit of another policy goes live.
	o = e.op(http.MethodPost, "/v1/policies/edge/experiments?experimentId=open",
		`{"policy":{"default_action":"allow","rules":[]}}`)
	if o.Error != nil {
		t.Fatalf("create: %+v", o.Error)
	}
	x, _ = e.experiment("policies/edge/experiments/open")
	if o = e.commit(x.Name, x.Etag); o.Error != nil {
		t.Fatalf("valid commit: %+v", o.Error)
	}
	if g := e.generations()[0]; g.State != "ACTIVE" || g.Generation != gens[0].Generation+1 {
		t.Fatalf("newest generation %+v", g)
	}
}

// Failure 2: the documented minimal body of a new policy, and a no-op
// deletion, get the defaults of a policy.toml without those keys.
func TestMinimalBodyCommitsAValidTree(t *testing.T) {
	e := start(t, "")
	for i, pol := range []string{"fresh", "edge"} {
		o := e.op(http.MethodPost, "/v1/policies/"+pol+"/experiments?experimentId=min", `{"policy":{"default_action":"allow"}}`)
		if o.Error != nil {
			t.Fatalf("create %s: %+v", pol, o.Error)
		}
		x, _ := e.experiment("policies/" + pol + "/experiments/min")
		if o = e.commit(x.Name, x.Etag); o.Error != nil {
			t.Fatalf("commit %s: %+v", pol, o.Error)
		}
		if g := e.generations()[0]; g.State != "ACTIVE" || g.Generation != uint64(2+i) || g.Commit != o.Metadata.Commit {
			t.Fatalf("newest generation %+v, operation's commit %q", g, o.Metadata.Commit)
		}
		if f := e.mainFile(pol + "/policy.toml"); strings.Contains(f, `""`) {
			t.Errorf("%s/policy.toml holds empty values:\n%s", pol, f)
		}
	}
}

// Failure 3: a branch whose tree is invalid cannot be committed.
func TestInvalidBranchIsNotCommitted(t *testing.T) {
	e := start(t, "")
	e.push("bad", map[string]string{"web/policy.toml": flip(webPolicy, `action = "allow"`, `action = "deny"`)}, "break web")
	e.reconcile()
	var x experiment
	e.eventually("the branch experiment", func() error {
		var code int
		if x, code = e.experiment("policies/web/experiments/branch-bad"); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	head, gens := e.srv.Head("policies", "main"), e.generations()
	o := e.commit(x.Name, x.Etag)
	if o.Error == nil || o.Error.Status != "FAILED_PRECONDITION" || !strings.Contains(o.Error.Message, "get is allowed") {
		t.Fatalf("commit of an invalid branch: %+v", o.Error)
	}
	if got := e.srv.Head("policies", "main"); got != head {
		t.Fatalf("main moved to %s", got)
	}
	e.reconcile()
	if now := e.generations(); len(now) != len(gens) {
		t.Fatalf("generations %+v, want still %+v", now, gens)
	}
	if _, code := e.experiment(x.Name); code != 200 {
		t.Fatalf("the experiment is gone: %d", code)
	}
}

// Failure 4: a branch left behind by a newer change of main previews and
// commits only its own change (a merge from the merge base), and a second
// commit is NOT_FOUND, also after main moved again.
func TestStaleBranchPreviewsAndMergesOnlyItsChange(t *testing.T) {
	e := start(t, "")
	apiV2 := flip(apiPolicy, "request.path == '/healthz'", "request.path in ['/healthz', '/livez']")
	branch := e.push("stale", map[string]string{"api/policy.toml": apiV2}, "api: also /livez")
	edgeV2 := flip(edgePolicy, "198.51.100.1", "198.51.100.2")
	e.push("main", map[string]string{"edge/policy.toml": edgeV2}, "edge: block another address")
	e.reconcile()
	e.waitActive(2)
	var x experiment
	e.eventually("the api experiment of the branch", func() error {
		var code int
		if x, code = e.experiment("policies/api/experiments/branch-stale"); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	for _, other := range e.experiments("edge") {
		t.Errorf("the branch previews the reverse of main's change: %+v", other)
	}
	if o := e.commit(x.Name, x.Etag); o.Error != nil {
		t.Fatalf("commit: %+v", o.Error)
	}
	if got := e.mainFile("edge/policy.toml"); got != strings.TrimSuffix(edgeV2, "\n") {
		t.Errorf("the commit undid main's change of edge:\n%s", got)
	}
	if got := e.mainFile("api/policy.toml"); got != strings.TrimSuffix(apiV2, "\n") {
		t.Errorf("api is not the branch's:\n%s", got)
	}
	if parents := e.srv.Git(e.srv.RepoPath("policies"), "log", "-1", "--format=%P", "main"); !strings.HasSuffix(parents, " "+branch) {
		t.Errorf("main's head is not a merge of the branch: parents %s", parents)
	}
	if o := e.commit(x.Name, x.Etag); o.Error == nil || o.Error.Status != "NOT_FOUND" {
		t.Errorf("second commit: %+v", o.Error)
	}
	e.push("main", map[string]string{"edge/policy.toml": edgePolicy}, "edge: back")
	e.reconcile()
	e.waitActive(4)
	if _, code := e.experiment(x.Name); code != 404 {
		t.Errorf("the merged branch's experiment came back: %d", code)
	}
	if o := e.commit(x.Name, x.Etag); o.Error == nil || o.Error.Status != "NOT_FOUND" {
		t.Errorf("commit after main moved: %+v", o.Error)
	}
}

// Failure 5: the policy of a branch experiment is the branch's: a PATCH
// of it is FAILED_PRECONDITION naming the branch; annotations may change.
func TestBranchExperimentPolicyIsReadOnly(t *testing.T) {
	e := start(t, "")
	e.push("try", map[string]string{"web/policy.toml": flip(webPolicy, "'GET'", "'HEAD'")}, "web: HEAD")
	e.reconcile()
	name := "/v1/policies/web/experiments/branch-try"
	e.eventually("the branch experiment", func() error {
		if _, code := e.experiment(name[4:]); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	var refusal struct{ Error apiError }
	code := e.call(1, http.MethodPatch, name, `{"policy":{"default_action":"allow"}}`, &refusal)
	if code != 400 || refusal.Error.Status != "FAILED_PRECONDITION" || !strings.Contains(refusal.Error.Message, `"try"`) {
		t.Fatalf("PATCH of the policy: %d %+v", code, refusal.Error)
	}
	if o := e.op(http.MethodPatch, name, `{"annotations":{"owner":"web-team"}}`); o.Error != nil {
		t.Fatalf("PATCH of the annotations: %+v", o.Error)
	}
}

// Failure 6: a live-branch head that does not descend from the active
// generation's commit (a force-push of unrelated history) is not
// promoted; the status says the source diverged, and the operator accepts
// the new history by naming its commit.
func TestUnrelatedHistoryIsNotPromoted(t *testing.T) {
	e := start(t, "")
	e.srv.Git(e.work, "checkout", "-q", "--orphan", "other")
	e.srv.Git(e.work, "rm", "-rq", "--cached", ".")
	other := e.srv.Commit(e.work, map[string]string{"web/policy.toml": flip(webPolicy, "'GET'", "'HEAD'"),
		"web/tests/web.toml": gittest.Deleted}, "unrelated")
	e.srv.Git(e.work, "push", "-qf", "origin", "other:main")
	e.reconcile()
	var st struct {
		Source struct {
			Commit   string `json:"commit"`
			Diverged *struct {
				Commit string `json:"commit"`
			} `json:"diverged"`
		} `json:"source"`
	}
	e.eventually("the divergence in the status", func() error {
		e.call(1, http.MethodGet, "/v1/status", "", &st)
		if st.Source.Diverged == nil || st.Source.Diverged.Commit != other {
			return fmt.Errorf("%+v", st.Source)
		}
		return nil
	})
	if g := e.generations(); len(g) != 1 || g[0].State != "ACTIVE" {
		t.Fatalf("generations %+v", g)
	}
	var refusal struct{ Error apiError }
	if code := e.call(2, http.MethodPost, "/v1/generations:acceptHistory", `{"commit":"`+strings.Repeat("0", 40)+`"}`, &refusal); code != 400 {
		t.Fatalf("accepting another commit: %d %+v", code, refusal)
	}
	status, err := exec.Command(e.c.Bin, "status", "--server", e.c.Nodes[1].Base()).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "reconciler accept-history "+other) {
		t.Errorf("reconciler status does not say what to do: %v\n%s", err, status)
	}
	if out, err := exec.Command(e.c.Bin, "accept-history", "--server", e.c.Nodes[2].Base(), other).CombinedOutput(); err != nil {
		t.Fatalf("reconciler accept-history: %v\n%s", err, out)
	}
	e.waitActive(2)
	if g := e.generations()[0]; g.Commit != other || g.State != "ACTIVE" {
		t.Fatalf("newest generation %+v", g)
	}
}

// Failure 7: an API commit keeps the policy's layout: fragments, includes,
// tests and comments stay; only what changed is written.
func TestAPICommitKeepsTheLayout(t *testing.T) {
	e := start(t, "")
	p := e.policyJSON("api")
	rules := p["rules"].([]any)
	for _, r := range rules {
		if r := r.(map[string]any); r["name"] == "allow-health" {
			r["match"] = "request.path in ['/healthz', '/livez']"
		}
	}
	body := fmt.Sprintf(`{"policy":{"default_action":"deny","rules":%s,"tests":%s}}`, mustJSON(rules), mustJSON(p["tests"]))
	if o := e.op(http.MethodPost, "/v1/policies/api/experiments?experimentId=livez", body); o.Error != nil {
		t.Fatalf("create: %+v", o.Error)
	}
	x, _ := e.experiment("policies/api/experiments/livez")
	before := e.srv.Head("policies", "main")
	if o := e.commit(x.Name, x.Etag); o.Error != nil {
		t.Fatalf("commit: %+v", o.Error)
	}
	repo := e.srv.RepoPath("policies")
	if got := e.srv.Git(repo, "diff", "--name-only", before, "main"); got != "api/policy.toml" {
		t.Errorf("the commit changed %q, want only api/policy.toml", got)
	}
	got := e.mainFile("api/policy.toml")
	for _, keep := range []string{"# api: kept in three files on purpose", `include = ["../_shared/office.toml"]`, "/livez"} {
		if !strings.Contains(got, keep) {
			t.Errorf("api/policy.toml lost %q:\n%s", keep, got)
		}
	}
	if strings.Contains(got, "deny-admin") || strings.Contains(got, "allow-office") {
		t.Errorf("rules of other files were copied into policy.toml:\n%s", got)
	}

	// A rule of the directory's fragment changes in that fragment alone.
	e.waitActive(2)
	p = e.policyJSON("api")
	for _, r := range p["rules"].([]any) {
		if r := r.(map[string]any); r["name"] == "deny-admin" {
			r["match"] = "request.path.startsWith('/admin/')"
		}
	}
	if o := e.op(http.MethodPost, "/v1/policies/api/experiments?experimentId=admin", `{"policy":`+mustJSON(p)+`}`); o.Error != nil {
		t.Fatalf("create: %+v", o.Error)
	}
	x, _ = e.experiment("policies/api/experiments/admin")
	before = e.srv.Head("policies", "main")
	if o := e.commit(x.Name, x.Etag); o.Error != nil {
		t.Fatalf("commit: %+v", o.Error)
	}
	if got := e.srv.Git(repo, "diff", "--name-only", before, "main"); got != "api/admin.toml" {
		t.Errorf("the commit changed %q, want only api/admin.toml", got)
	}
}

// Failure 8: branches older than a newly committed policy do not become
// "deletion" experiments of it, and so leave the cap alone.
func TestOldBranchesLeaveTheCapAlone(t *testing.T) {
	e := start(t, "max_experiments_per_policy = 1\n")
	e.push("old-1", map[string]string{"README.md": "one\n"}, "readme")
	e.push("old-2", map[string]string{"README.md": "two\n"}, "readme")
	e.push("main", map[string]string{"fresh/policy.toml": edgePolicy}, "a new policy")
	e.reconcile()
	e.waitActive(2)
	for _, x := range e.experiments("fresh") {
		t.Errorf("an old branch previews deleting the new policy: %+v", x)
	}
	if o := e.op(http.MethodPost, "/v1/policies/fresh/experiments?experimentId=mine", `{"policy":{"default_action":"deny"}}`); o.Error != nil {
		t.Fatalf("create under the cap: %+v", o.Error)
	}
}

// A branch that cannot be merged into main without a human shows the
// conflict as its experiment's state, is not previewed, and cannot be
// committed.
func TestConflictIsTheExperimentsState(t *testing.T) {
	e := start(t, "")
	e.push("clash", map[string]string{"web/policy.toml": webPolicy +
		"\n[[rules]]\nname = \"allow-head\"\npriority = 110\naction = \"allow\"\nmatch = \"request.method == 'HEAD'\"\n"}, "web: HEAD too")
	e.push("main", map[string]string{"web/policy.toml": flip(webPolicy, "the public site", "the public website")}, "web: wording")
	e.reconcile()
	var x experiment
	e.eventually("the conflicted experiment", func() error {
		var code int
		if x, code = e.experiment("policies/web/experiments/branch-clash"); code != 200 || x.Conflict == "" {
			return fmt.Errorf("HTTP %d %+v", code, x)
		}
		return nil
	})
	if x.Previewed || !strings.Contains(x.Conflict, "web/policy.toml") {
		t.Errorf("conflicted experiment %+v", x)
	}
	head := e.srv.Head("policies", "main")
	if o := e.commit(x.Name, x.Etag); o.Error == nil || o.Error.Status != "FAILED_PRECONDITION" || !strings.Contains(o.Error.Message, "web/policy.toml") {
		t.Fatalf("commit of a conflicted branch: %+v", o.Error)
	}
	if got := e.srv.Head("policies", "main"); got != head {
		t.Fatalf("main moved to %s", got)
	}
}

// The JSON of GET /v1/policies/{p} posts back as an experiment body
// unchanged, and the experiment's policy is named policies/{p} (AIP-236).
func TestLivePolicyPostsBackAsAnExperiment(t *testing.T) {
	e := start(t, "")
	live := e.policyJSON("api")
	o := e.op(http.MethodPost, "/v1/policies/api/experiments?experimentId=same", `{"policy":`+mustJSON(live)+`}`)
	if o.Error != nil {
		t.Fatalf("create from the live policy's JSON: %+v", o.Error)
	}
	if !strings.Contains(string(o.Response), `"policy":{"name":"policies/api"`) {
		t.Errorf("the operation's response names the policy otherwise: %.200s", o.Response)
	}
	x, _ := e.experiment("policies/api/experiments/same")
	if x.Etag != live["etag"] {
		t.Errorf("experiment etag %s, live etag %v: the same policy must have the same etag", x.Etag, live["etag"])
	}
	var p struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(x.Policy, &p); err != nil || p.Name != "policies/api" {
		t.Errorf("embedded policy name %q (%v), want policies/api", p.Name, err)
	}
	if o := e.op(http.MethodPatch, "/v1/"+x.Name, fmt.Sprintf(`{"etag":%q,"policy":%s}`, x.Etag, x.Policy)); o.Error != nil {
		t.Errorf("PATCH with the experiment's own policy: %+v", o.Error)
	}
}
