// Package changepath_test holds the real-process tests of issue 14, "the
// change path must never break main": three `reconciler serve` processes
// following a repository on a real git server (internal/gittest), driven
// through the HTTP API and git pushes only.
//
//	go test -count=1 ./test/changepath/
package changepath_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBinary()
	os.Exit(code)
}

// Policies of the test repository: "web" is one file with a test that a
// flipped action fails; "api" is spread over an include of a shared
// fragment, a fragment of its own and a test file, so that a commit that
// flattens it shows; "edge" is what main changes behind a branch's back.
const (
	webPolicy = `# web: the public site
default_action = "deny"

[[rules]]
name = "allow-get"
priority = 100
action = "allow"
match = "request.method == 'GET'"
`
	webTest = `[[tests]]
name = "get is allowed"
request = { method = "GET", path = "/" }
expect = "allow"
`
	apiPolicy = `# api: kept in three files on purpose
default_action = "deny"
include = ["../_shared/office.toml"]

[[rules]]
name = "allow-health"
priority = 100
action = "allow"
match = "request.path == '/healthz'"
`
	apiFragment = `[[rules]]
name = "deny-admin"
priority = 50
action = "deny"
match = "request.path.startsWith('/admin')"
`
	apiTest = `[[tests]]
name = "health is allowed"
request = { method = "GET", path = "/healthz" }
expect = "allow"
`
	officeFragment = `[[rules]]
name = "allow-office"
priority = 200
action = "allow"
match = "request.source_ip == '192.0.2.1'"
`
	edgePolicy = `default_action = "allow"

[[rules]]
name = "deny-blocked"
priority = 100
action = "deny"
match = "request.source_ip == '198.51.100.1'"
`
)

func repoFiles() map[string]string {
	return map[string]string{
		"README.md":           "policies\n",
		"web/policy.toml":     webPolicy,
		"web/tests/web.toml":  webTest,
		"api/policy.toml":     apiPolicy,
		"api/admin.toml":      apiFragment,
		"api/tests/api.toml":  apiTest,
		"_shared/office.toml": officeFragment,
		"edge/policy.toml":    edgePolicy,
	}
}

// env is a cluster, its repository and a working clone of it.
type env struct {
	t    *testing.T
	srv  *gittest.Server
	url  string
	work string
	c    *harness.Cluster
}

// start serves repoFiles from a git server to three nodes that poll
// hourly (the tests trigger passes), with auto-started previews and the
// extra [preview] settings.
func start(t *testing.T, previewExtra string) *env {
	t.Helper()
	return startWith(t, repoFiles(), previewExtra)
}

// startWith is start with the repository holding files.
func startWith(t *testing.T, files map[string]string, previewExtra string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := gittest.NewServer(t, gittest.Options{})
	url := srv.InitRepo("policies", files)
	e := &env{t: t, srv: srv, url: url, work: srv.Clone(url)}
	e.c = harness.StartCluster(t, harness.ClusterOptions{
		Size: 3,
		Race: true,
		Configure: func(cfg *harness.Config) {
			cfg.GitURL, cfg.Poll = url, "@every 1h"
			cfg.Extra = "[preview]\nauto_start = true\n" + previewExtra
		},
	})
	e.waitActive(1)
	return e
}

var client = harness.NewClient(30*time.Second, 8)

// call sends body to a node (any node: followers forward) and decodes the
// answer into out when it is set. It waits out an election (DoRetry): the
// writes of these tests are idempotent, carry an etag or create with an
// experimentId.
func (e *env) call(node int, method, path, body string, out any) int {
	e.t.Helper()
	code, data, err := client.DoRetry(method, e.c.Nodes[node].Base()+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return code
}

func (e *env) eventually(what string, cond func() error) {
	e.t.Helper()
	if err := harness.Eventually(60*time.Second, cond); err != nil {
		e.t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}

// reconcile asks for a pass and waits until the leader finished one that
// started after the call: a pass is over when the source commit in the
// status is main's head (the leader fetched it).
func (e *env) reconcile() {
	e.t.Helper()
	head := e.srv.Head("policies", "main")
	e.call(1, http.MethodPost, "/v1/cluster:reconcile", "{}", nil)
	e.eventually("a pass at "+head, func() error {
		var st struct {
			Source struct{ Commit string } `json:"source"`
		}
		e.call(0, http.MethodGet, "/v1/status", "", &st)
		if st.Source.Commit != head {
			return fmt.Errorf("source at %q", st.Source.Commit)
		}
		return nil
	})
}

func (e *env) generations() []apiv1.Generation {
	e.t.Helper()
	var out apiv1.GenerationList
	e.call(0, http.MethodGet, "/v1/generations", "", &out)
	return out.Generations
}

// waitActive waits until every node serves generation n or newer.
func (e *env) waitActive(n uint64) {
	e.t.Helper()
	for _, node := range e.c.Nodes {
		e.eventually(fmt.Sprintf("%s serving generation %d", node.ID, n), func() error {
			s, err := client.Status(node)
			if err == nil && s.ServedGeneration < n {
				err = fmt.Errorf("serves %d", s.ServedGeneration)
			}
			return err
		})
	}
}

type experiment struct {
	Name            string          `json:"name"`
	Etag            string          `json:"etag"`
	Policy          json.RawMessage `json:"policy"`
	PreviewMetadata *struct {
		State string `json:"state"`
	} `json:"previewMetadata"`
	Source struct {
		Kind       string `json:"kind"`
		Branch     string `json:"branch"`
		HeadCommit string `json:"headCommit"`
	} `json:"source"`
	Previewed  bool `json:"previewed"`
	Validation *struct {
		Valid  bool     `json:"valid"`
		Errors []string `json:"errors"`
		Tests  *struct {
			Total  int `json:"total"`
			Passed int `json:"passed"`
		} `json:"tests"`
	} `json:"validation"`
	Conflict string `json:"conflict"`
}

func (e *env) experiment(name string) (experiment, int) {
	e.t.Helper()
	var x experiment
	code := e.call(0, http.MethodGet, "/v1/"+name, "", &x)
	return x, code
}

func (e *env) experiments(pol string) []experiment {
	e.t.Helper()
	var out struct{ Experiments []experiment }
	e.call(0, http.MethodGet, "/v1/policies/"+pol+"/experiments", "", &out)
	return out.Experiments
}

type apiError struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

type operation struct {
	Name     string          `json:"name"`
	Done     bool            `json:"done"`
	Error    *apiError       `json:"error"`
	Response json.RawMessage `json:"response"`
	Metadata struct {
		Commit       string `json:"commit"` // a commit's pushed commit, from which any leader completes it
		TestsRemoved *int   `json:"testsRemoved"`
	} `json:"metadata"`
}

// op sends a method answering an Operation and waits until it is done; a
// refusal before any operation exists comes back as the error.
func (e *env) op(method, path, body string) operation {
	e.t.Helper()
	var raw struct {
		operation
		Error *apiError `json:"error"`
	}
	code := e.call(2, method, path, body, &raw)
	if code != 200 {
		return operation{Done: true, Error: raw.Error}
	}
	o := raw.operation
	o.Error = raw.Error
	for !o.Done {
		e.eventually("operation "+o.Name, func() error {
			e.call(1, http.MethodGet, "/v1/"+o.Name, "", &o)
			if !o.Done {
				return fmt.Errorf("%+v", o)
			}
			return nil
		})
	}
	if o.Error != nil && o.Error.Status == "" {
		o.Error.Status = rpcCodes[o.Error.Code] // an operation's error carries the google.rpc code alone
	}
	return o
}

var rpcCodes = map[int]string{5: "NOT_FOUND", 9: "FAILED_PRECONDITION", 10: "ABORTED", 13: "INTERNAL"}

// commit commits an experiment with its current etag.
func (e *env) commit(name, etag string) operation {
	e.t.Helper()
	return e.op(http.MethodPost, "/v1/"+name+":commit", fmt.Sprintf(`{"etag":%q}`, etag))
}

// push commits files on branch of the working clone (created from main's
// head when new) and pushes it; the clone is left on main.
func (e *env) push(branch string, files map[string]string, msg string) string {
	e.t.Helper()
	e.srv.Checkout(e.work, "main")
	e.srv.Pull(e.work)
	if branch != "main" {
		if _, err := e.srv.TryGit(e.work, "rev-parse", "--verify", "-q", "refs/heads/"+branch); err != nil {
			e.srv.CreateBranch(e.work, branch)
		} else {
			e.srv.Checkout(e.work, branch)
		}
	}
	h := e.srv.Commit(e.work, files, msg)
	e.srv.Push(e.work, branch)
	e.srv.Checkout(e.work, "main")
	return h
}

// mainFile reads a file of main's head on the server.
func (e *env) mainFile(p string) string {
	return e.srv.Show("policies", "main:"+p)
}

// policyJSON is GET /v1/policies/{p}.
func (e *env) policyJSON(pol string) map[string]any {
	e.t.Helper()
	var p map[string]any
	if code := e.call(0, http.MethodGet, "/v1/policies/"+pol, "", &p); code != 200 {
		e.t.Fatalf("GET policy %s: %d %v", pol, code, p)
	}
	return p
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func flip(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic(fmt.Sprintf("%q not in %q", old, s))
	}
	return strings.Replace(s, old, new, 1)
}
