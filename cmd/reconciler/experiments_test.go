package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAPI answers the routes of answers ("METHOD path" to a status and
// body) and records each request as "METHOD path body".
type fakeAPI struct {
	mu      sync.Mutex
	answers map[string]func() (int, string)
	seen    []string
}

func newFakeAPI(t *testing.T, answers map[string]func() (int, string)) (*fakeAPI, string) {
	f := &fakeAPI{answers: answers}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Method + " " + r.URL.RequestURI()
		f.mu.Lock()
		f.seen = append(f.seen, key+" "+string(body))
		answer, ok := f.answers[key]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":{"code":404,"status":"NOT_FOUND","message":"no such resource: %s"}}`, r.URL.Path)
			return
		}
		code, out := answer()
		w.WriteHeader(code)
		io.WriteString(w, out)
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func fixed(code int, body string) func() (int, string) {
	return func() (int, string) { return code, body }
}

const experimentJSON = `{"name":"policies/web/experiments/e2","etag":"e2tag","policy":{"name":"policies/web",
"default_action":"deny","rules":[{"name":"a","priority":1,"action":"allow","match":"true"},
{"name":"b","priority":2,"action":"deny","match":"false"}]},"source":{"kind":"api"},"previewed":true,
"previewMetadata":{"state":"ACTIVE"},"validation":{"valid":true,"errors":[],"tests":{"total":2,"passed":2}},
"stats":{"evaluated":10,"allowToDeny":3,"denyToAllow":1}}`

// TestExperimentsCommitWaitsForTheGeneration: commit --wait reads the
// etag, commits, prints a progress line per :wait answer that is not done,
// and ends with the active generation; a failed operation exits 1.
func TestExperimentsCommitWaitsForTheGeneration(t *testing.T) {
	waits := 0
	f, url := newFakeAPI(t, map[string]func() (int, string){
		"GET /v1/policies/web/experiments/e2": fixed(200, experimentJSON),
		"POST /v1/policies/web/experiments/e2:commit": fixed(200,
			`{"name":"operations/abc","done":false,"metadata":{"verb":"commit","target":"policies/web/experiments/e2"}}`),
		"POST /v1/operations/abc:wait": func() (int, string) {
			waits++
			if waits < 3 {
				return 200, `{"name":"operations/abc","done":false,"metadata":{"verb":"commit","target":"policies/web/experiments/e2","commit":"c0ffee"}}`
			}
			return 200, `{"name":"operations/abc","done":true,"metadata":{"verb":"commit","target":"policies/web/experiments/e2","commit":"c0ffee"},"response":{}}`
		},
		"GET /v1/status": fixed(200, `{"activeGeneration":5,"commit":"c0ffee"}`),
	})
	code, stdout, stderr := cli(t, "", "experiments", "commit", "--server", url, "--wait", "web", "e2")
	if code != 0 || strings.Count(stderr, "operations/abc: commit policies/web/experiments/e2") != 3 ||
		!strings.Contains(stderr, "pushed c0ffee, waiting for its generation") || !strings.Contains(stdout, "Generation 5 (c0ffee) is ACTIVE.") {
		t.Errorf("commit --wait = %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(strings.Join(f.seen, "\n"), `:commit {"etag":"e2tag","parentEtag":""}`) {
		t.Errorf("requests %q", f.seen)
	}

	_, failing := newFakeAPI(t, map[string]func() (int, string){
		"POST /v1/policies/web/experiments/e2:commit": fixed(200, `{"name":"operations/x","done":true,
"metadata":{"verb":"commit","target":"policies/web/experiments/e2"},"error":{"code":9,"message":"test \"t\" fails"}}`),
	})
	code, stdout, _ = cli(t, "", "experiments", "commit", "--server", failing, "--etag", "e", "web", "e2")
	if code != exitCheck || !strings.Contains(stdout, "FAILED (FAILED_PRECONDITION)") || !strings.Contains(stdout, `test "t" fails`) {
		t.Errorf("failed commit = %d %q", code, stdout)
	}
}

func TestExperimentsListGetAndDiff(t *testing.T) {
	_, url := newFakeAPI(t, map[string]func() (int, string){
		"GET /v1/policies/web/experiments?pageSize=1000":              fixed(200, `{"experiments":[`+experimentJSON+`],"nextPageToken":"p2"}`),
		"GET /v1/policies/web/experiments?pageSize=1000&pageToken=p2": fixed(200, `{"experiments":[{"name":"policies/web/experiments/e3","etag":"x","source":{"kind":"pull_request","number":7}}]}`),
		"GET /v1/policies/web/experiments/e2":                         fixed(200, experimentJSON),
		"GET /v1/policies/web": fixed(200, `{"name":"policies/web","etag":"live","generation":4,"default_action":"allow",
"rules":[{"name":"a","priority":1,"action":"allow","match":"true"},{"name":"c","priority":3,"action":"deny","match":"x"}]}`),
	})
	code, stdout, _ := cli(t, "", "experiments", "list", "--server", url, "web")
	want := `NAME                         SOURCE           STATE   VALID            EVALUATED  ALLOW->DENY  DENY->ALLOW  ETAG   AGE
policies/web/experiments/e2  api              ACTIVE  yes (2/2 tests)  10         3            1            e2tag  -
policies/web/experiments/e3  pull_request #7  NEW     -                0          0            0            x      -
`
	if code != 0 || stdout != want {
		t.Errorf("list = %d\n%s\nwant\n%s", code, stdout, want)
	}
	if code, stdout, _ := cli(t, "", "experiments", "list", "--server", url, "-o", "json", "web"); code != 0 ||
		!strings.Contains(stdout, `"experiments":[{`) || strings.Count(stdout, `"name":"policies/web/experiments/`) != 2 {
		t.Errorf("list json = %d %q", code, stdout)
	}
	code, stdout, _ = cli(t, "", "experiments", "diff", "--server", url, "web", "e2")
	want = `--- policies/web (live)
+++ policies/web/experiments/e2
~ default_action: "allow" -> "deny"
+ rule b
- rule c
`
	if code != 0 || stdout != want {
		t.Errorf("diff = %d\n%s\nwant\n%s", code, stdout, want)
	}
	if code, _, stderr := cli(t, "", "experiments", "get", "--server", url, "web", "nope"); code != exitCheck ||
		!strings.Contains(stderr, "404 Not Found: NOT_FOUND: no such resource") {
		t.Errorf("get unknown = %d %q", code, stderr)
	}
	for _, args := range [][]string{{"list"}, {"get", "web"}, {"commit", "web"}, {"create", "web"}, {"frobnicate"}, {"list", "-o", "yaml", "web"}} {
		if code, _, _ := cli(t, "", append([]string{"experiments"}, args...)...); code != exitUsage {
			t.Errorf("experiments %v = %d, want a usage error", args, code)
		}
	}
}

// TestArgumentsStayInTheirSegment: an argument cannot climb out of the
// resource it names.
func TestArgumentsStayInTheirSegment(t *testing.T) {
	f, url := newFakeAPI(t, nil)
	cli(t, "", "experiments", "get", "--server", url, "web", "../../status")
	cli(t, "", "operations", "get", "--server", url, "operations/../x")
	for _, s := range f.seen {
		if !strings.Contains(s, "%2F") {
			t.Errorf("request %q left its segment", s)
		}
	}
}

// TestNodesAndRaftCommands: the scope flags, the health exit code and the
// raft tables.
func TestNodesAndRaftCommands(t *testing.T) {
	f, url := newFakeAPI(t, map[string]func() (int, string){
		"POST /v1/nodes:healthCheck": fixed(200, `{"nodes":[{"id":"n1","healthy":"HEALTHY","reasons":[]},
{"id":"n2","healthy":"NOT_HEALTHY","reasons":["git source: fetch: refused"]}]}`),
		"POST /v1/nodes:changeState":       fixed(200, `{"changed":[{"id":"n4","from":"ACTIVE","to":"PASSIVE"}],"unchanged":["n5"]}`),
		"GET /v1/raft/peers":               fixed(200, `{"leader":"n1","peers":[{"id":"n1","address":"127.0.0.1:1","suffrage":"VOTER","leader":true,"reachable":true}]}`),
		"POST /v1/raft:transferLeadership": fixed(200, `{"from":"n1","leader":"n2"}`),
		"POST /v1/raft:removePeer":         fixed(400, `{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"the peer is alive: n3 answers"}}`),
	})
	code, stdout, _ := cli(t, "", "nodes", "health", "--server", url, "--group", "edge")
	if code != exitCheck || !strings.Contains(stdout, "n2  NOT_HEALTHY  git source: fetch: refused") {
		t.Errorf("health = %d %q", code, stdout)
	}
	if code, stdout, _ := cli(t, "", "nodes", "state", "--server", url, "--group", "edge", "--subgroup", "eu", "passive"); code != 0 ||
		stdout != "n4: ACTIVE -> PASSIVE\nn5: already PASSIVE\n" {
		t.Errorf("state = %d %q", code, stdout)
	}
	seen := strings.Join(f.seen, "\n")
	if !strings.Contains(seen, `POST /v1/nodes:changeState {"state":"PASSIVE","group":"edge","subgroup":"eu"}`) ||
		!strings.Contains(seen, `POST /v1/nodes:healthCheck {"group":"edge"}`) {
		t.Errorf("requests:\n%s", seen)
	}
	for _, args := range [][]string{{"state", "PASSIVE"}, {"state", "--name", "n1", "--group", "g", "PASSIVE"}, {"health", "--subgroup", "eu"}} {
		if code, _, _ := cli(t, "", append([]string{"nodes", args[0], "--server", url}, args[1:]...)...); code != exitUsage {
			t.Errorf("nodes %v = %d", args, code)
		}
	}
	if code, stdout, _ := cli(t, "", "raft", "peers", "--server", url); code != 0 ||
		stdout != "ID  ADDRESS      SUFFRAGE  LEADER  REACHABLE\nn1  127.0.0.1:1  VOTER     true    true\n" {
		t.Errorf("peers = %d %q", code, stdout)
	}
	if code, stdout, _ := cli(t, "", "raft", "transfer-leadership", "--server", url, "n2"); code != 0 || stdout != "Leadership moved from n1 to n2.\n" {
		t.Errorf("transfer = %d %q", code, stdout)
	}
	if code, _, stderr := cli(t, "", "raft", "remove", "--server", url, "n3"); code != exitCheck || !strings.Contains(stderr, "FAILED_PRECONDITION: the peer is alive") {
		t.Errorf("remove = %d %q", code, stderr)
	}
}
