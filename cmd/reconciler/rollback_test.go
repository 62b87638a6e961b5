package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// rollbackServer answers POST /v1/generations:rollback with answer, and
// keeps the bodies and Authorization headers it received.
func rollbackServer(t *testing.T, code int, answer string) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/generations:rollback" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, string(body)+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(code)
		w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

func TestRollbackCommand(t *testing.T) {
	const active = `{"targetGeneration":4,"targetCommit":"aaaa","commit":"bbbb","revision":"main@sha1:bbbb",
"message":"Revert to generation 4 (aaaa)","generation":7,"state":"ACTIVE"}`
	srv, seen := rollbackServer(t, 200, active)
	t.Setenv("MY_TOKEN", "tok")
	code, stdout, stderr := cli(t, "", "rollback", "--server", srv.URL, "--to", "4", "--token-env", "MY_TOKEN")
	if code != 0 || stderr != "" || !strings.Contains(stdout, `Pushed main@sha1:bbbb: "Revert to generation 4 (aaaa)"`) ||
		!strings.Contains(stdout, "Generation 7 is ACTIVE") {
		t.Errorf("rollback = %d %q %q", code, stdout, stderr)
	}
	var body map[string]any
	got := seen()
	req, auth, _ := strings.Cut(got[0], "|")
	if json.Unmarshal([]byte(req), &body) != nil || body["generation"] != 4.0 || body["waitSeconds"] != 30.0 || auth != "Bearer tok" {
		t.Errorf("request = %q", got[0])
	}
	code, stdout, _ = cli(t, "", "rollback", "--server", strings.TrimPrefix(srv.URL, "http://"), "--wait", "0", "--format", "json")
	if code != 0 || stdout != active {
		t.Errorf("json = %d %q", code, stdout)
	}
	if req, auth, _ := strings.Cut(seen()[1], "|"); strings.Contains(req, "generation") || auth != "" {
		t.Errorf("default request = %q", seen()[1])
	}
}

func TestRollbackCommandOpenedPullRequest(t *testing.T) {
	srv, _ := rollbackServer(t, 200, `{"targetGeneration":4,"targetCommit":"aaaa","commit":"bbbb",
"revision":"reconciler/revert-generation-4-bbbb@sha1:bbbb","message":"Revert to generation 4 (aaaa)",
"pullRequestUrl":"https://github.com/o/r/pull/9"}`)
	code, stdout, _ := cli(t, "", "rollback", "--server", srv.URL)
	if code != exitCheck || !strings.Contains(stdout, "opened the pull request https://github.com/o/r/pull/9") ||
		strings.Contains(stdout, "Pushed") {
		t.Errorf("pull request = %d %q", code, stdout)
	}
}

func TestRollbackCommandFailures(t *testing.T) {
	invalid, _ := rollbackServer(t, 200, `{"commit":"bbbb","revision":"main@sha1:bbbb","message":"Revert to generation 4 (aaaa)",
"generation":7,"state":"INVALID","errors":["web/policy.toml:3: boom"]}`)
	code, stdout, _ := cli(t, "", "rollback", "--server", invalid.URL)
	if code != exitCheck || !strings.Contains(stdout, "INVALID") || !strings.Contains(stdout, "web/policy.toml:3: boom") {
		t.Errorf("invalid = %d %q", code, stdout)
	}
	refused, _ := rollbackServer(t, 400, `{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"the remote refused to update refs/heads/main: GH006"}}`)
	code, stdout, stderr := cli(t, "", "rollback", "--server", refused.URL)
	if code != exitCheck || stdout != "" || !strings.Contains(stderr, "FAILED_PRECONDITION: the remote refused") {
		t.Errorf("refused = %d %q %q", code, stdout, stderr)
	}
	for _, args := range [][]string{{"--format", "yaml"}, {"--wait", "-1s"}, {"--to", "x"}, {"extra"}} {
		if code, _, _ := cli(t, "", append([]string{"rollback"}, args...)...); code != exitUsage {
			t.Errorf("%v = %d", args, code)
		}
	}
}
