package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestWritesMustBeJSON: a browser can POST a form or text/plain across
// sites without asking; the API refuses every write that is not JSON,
// with or without a token. Decisions and the webhook are exempt.
func TestWritesMustBeJSON(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{})
	open := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}})
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonp", "json", "-"} {
		header := map[string]string{"Content-Type": ct}
		if ct == "-" {
			header["Content-Type"] = ""
		}
		for _, p := range []string{"/v1/generations:rollback", "/v1/cluster:reconcile", "/v1/policies/web/experiments/e1:commit"} {
			withToken := map[string]string{"Authorization": "Bearer " + adminToken}
			for k, v := range header {
				withToken[k] = v
			}
			wantError(t, e.do(http.MethodPost, p, strings.NewReader(`{}`), withToken), 415, "INVALID_ARGUMENT")
			wantError(t, open.do(http.MethodPost, p, strings.NewReader(`{}`), header), 415, "INVALID_ARGUMENT")
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		a := open.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader(`{}`), map[string]string{"Content-Type": ct})
		if a.code != http.StatusAccepted {
			t.Errorf("%s: %d %s", ct, a.code, a.body)
		}
	}
	a := open.do(http.MethodPost, "/v1/policies/web:evaluate", strings.NewReader(`{"path":"/"}`), map[string]string{"Content-Type": "text/plain"})
	if a.code != 200 {
		t.Errorf("a decision is data, not a write: %d %s", a.code, a.body)
	}
}

// TestCrossOriginRefused: a request a browser sends from another site
// (Origin, or Sec-Fetch-Site without it) is refused unless its origin
// is configured; then the answer carries the CORS headers.
func TestCrossOriginRefused(t *testing.T) {
	e := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}, AllowedOrigins: []string{"https://console.example"}})
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example"},
		{"Origin": "null"},
		{"Origin": "https://console.example.evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
	} {
		wantError(t, e.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader(`{}`), h), 403, "PERMISSION_DENIED")
		wantError(t, e.do(http.MethodGet, "/v1/status", nil, h), 403, "PERMISSION_DENIED")
		wantError(t, e.do(http.MethodPost, "/v1/policies/web:mirror", strings.NewReader(`{}`), h), 403, "PERMISSION_DENIED")
	}
	a := e.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader(`{}`), map[string]string{"Origin": "https://Console.example/"})
	if a.code != http.StatusAccepted || a.header.Get("Access-Control-Allow-Origin") != "https://console.example" {
		t.Errorf("allowed origin = %d %v %s", a.code, a.header, a.body)
	}
	pre := e.do(http.MethodOptions, "/v1/cluster:reconcile", nil, map[string]string{"Origin": "https://console.example",
		"Access-Control-Request-Method": "POST"})
	if pre.code != http.StatusNoContent || !strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight = %d %v", pre.code, pre.header)
	}
	wantError(t, e.do(http.MethodOptions, "/v1/cluster:reconcile", nil, map[string]string{"Origin": "https://evil.example"}), 403, "PERMISSION_DENIED")
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}, nil} {
		if a := e.do(http.MethodGet, "/v1/status", nil, h); a.code != 200 {
			t.Errorf("%v: %d %s", h, a.code, a.body)
		}
	}
	// :authorize passes the original client's headers as data.
	if a := e.do(http.MethodGet, "/v1/policies/web:authorize/", nil, map[string]string{"Origin": "https://evil.example"}); a.code != 200 && a.code != 403 {
		t.Errorf("authorize = %d %s", a.code, a.body)
	} else if a.header.Get("X-Policy-Decision") == "" {
		t.Errorf("authorize did not decide: %d %s", a.code, a.body)
	}
}

// TestLoopbackHost: on a loopback bind, a Host that is not this machine
// (a rebound DNS name) is refused for every API request, reads and
// probes too; decisions are exempt (Host is the gateway's data).
func TestLoopbackHost(t *testing.T) {
	e := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}, LoopbackOnly: true})
	for _, host := range []string{"evil.example", "evil.example:8181", "localhost.evil.example", "10.0.0.1:8181", "0.0.0.0"} {
		h := map[string]string{"Host": host}
		wantError(t, e.do(http.MethodGet, "/v1/status", nil, h), 403, "PERMISSION_DENIED")
		wantError(t, e.do(http.MethodGet, "/metrics", nil, h), 403, "PERMISSION_DENIED")
		wantError(t, e.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader(`{}`), h), 403, "PERMISSION_DENIED")
		if a := e.do(http.MethodPost, "/v1/policies/web:evaluate", strings.NewReader(`{"path":"/"}`), h); a.code != 200 {
			t.Errorf("evaluate with Host %s = %d %s", host, a.code, a.body)
		}
		if a := e.do(http.MethodGet, "/v1/policies/web:authorize/", nil, h); a.header.Get("X-Policy-Decision") == "" {
			t.Errorf("authorize with Host %s = %d %s", host, a.code, a.body)
		}
	}
	for _, host := range []string{"localhost:8181", "127.0.0.1:8181", "[::1]:8181", "LOCALHOST"} {
		if a := e.do(http.MethodGet, "/v1/status", nil, map[string]string{"Host": host}); a.code != 200 {
			t.Errorf("Host %s = %d %s", host, a.code, a.body)
		}
	}
	// A node on a routable address has no such check (it has credentials).
	routable := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}})
	if a := routable.do(http.MethodGet, "/v1/status", nil, map[string]string{"Host": "reconciler.example"}); a.code != 200 {
		t.Errorf("routable = %d", a.code)
	}
}
