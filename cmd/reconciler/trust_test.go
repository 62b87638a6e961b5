package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// startServe runs `serve --config path` in process and returns the API's
// base URL and the log; the node stops with the test.
func startServe(t *testing.T, path string) (string, *testlog.Buffer) {
	t.Helper()
	return startServeWith(t, path, "")
}

// startServeWith is startServe with self as the reconciler binary serve
// runs its validate-worker children from ("": it validates in-process).
func startServeWith(t *testing.T, path, self string) (string, *testlog.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testlog.Buffer
	a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, self: self}
	done := make(chan int, 1)
	go func() { done <- a.run([]string{"serve", "--config", path}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		for _, line := range strings.Split(errOut.String(), "\n") {
			if addr := listenAddr(line); addr != "" {
				waitReady(t, "http://"+addr)
				return "http://" + addr, &errOut
			}
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no listening line in: %s", errOut.String())
	return "", nil
}

// browserPost is what a page on another site makes a browser send: a
// "simple" request, which goes out without a CORS preflight.
func browserPost(t *testing.T, url, contentType, origin, host, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if origin != "" {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestBrowserAttackOnADevelopmentNode: a node started as `make run` does
// (loopback, no API credentials) is reachable from any web page the
// user opens. The page's cross-site text/plain POSTs (create an
// allow-all experiment, commit it, roll back) and a DNS-rebound page
// (Host is the attacker's name, the request then looks same-origin) are
// refused; decisions still answer, and the node said at start that it
// runs without credentials.
func TestBrowserAttackOnADevelopmentNode(t *testing.T) {
	t.Setenv("RECONCILER_TOKEN", "")
	base, logs := startServe(t, writeServeConfig(t, "127.0.0.1:0", "json"))
	allowAll := `{"policy":{"default_action":"allow"}}`
	exps := base + "/v1/policies/web/experiments"
	code, body := browserPost(t, exps+"?experimentId=evil", "text/plain", "https://evil.example", "", allowAll)
	if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
		t.Errorf("cross-site text/plain create: %d %s", code, body)
	}
	// The etag is a content hash the attacker can compute; here it is
	// taken from the answer when the create went through.
	var op struct {
		Response struct{ Etag string } `json:"response"`
	}
	_ = json.Unmarshal([]byte(body), &op)
	commit := fmt.Sprintf(`{"etag":%q}`, op.Response.Etag)
	for _, tc := range []struct{ what, url, ct, origin, host, body string }{
		{"cross-site text/plain commit", exps + "/evil:commit", "text/plain", "https://evil.example", "", commit},
		{"cross-site form create", exps + "?experimentId=evil2", "application/x-www-form-urlencoded", "https://evil.example", "", allowAll},
		{"cross-site text/plain rollback", base + "/v1/generations:rollback", "text/plain", "https://evil.example", "", `{}`},
		{"DNS rebinding create", exps + "?experimentId=evil3", "text/plain", "", "evil.example:8181", allowAll},
		{"DNS rebinding create, JSON", exps + "?experimentId=evil4", "application/json", "", "evil.example:8181", allowAll},
	} {
		code, body := browserPost(t, tc.url, tc.ct, tc.origin, tc.host, tc.body)
		if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
			t.Errorf("%s: %d %s", tc.what, code, body)
		}
	}
	resp, err := http.Get(exps)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(list), "evil") {
		t.Errorf("the attacker's experiment exists: %s", list)
	}
	decide(t, base)
	resp, err = http.Post(base+"/v1/policies/web:evaluate", "application/json", strings.NewReader(`{"path":"/admin/users"}`))
	if err != nil {
		t.Fatal(err)
	}
	live, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(live), `"decision":"DENY","rule":"block-admin"`) {
		t.Errorf("the live policy changed: %s", live)
	}
	if !strings.Contains(logs.String(), `"@level":"warn"`) || !strings.Contains(logs.String(), "the API has no credentials") {
		t.Errorf("no warning about the development mode: %s", logs.String())
	}
}

// TestServeRefusesAnExposedAPI: a node whose API others can reach does
// not start without credentials (it fails before it binds anything).
func TestServeRefusesAnExposedAPI(t *testing.T) {
	t.Setenv("RECONCILER_TOKEN", "")
	var out, errOut testlog.Buffer
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	code := a.run([]string{"serve", "--config", writeServeConfig(t, "192.0.2.1:8181", "json")})
	if code != exitCheck || !strings.Contains(errOut.String(), "not a loopback address and the API has no credentials") {
		t.Errorf("exit %d: %s", code, errOut.String())
	}
}
