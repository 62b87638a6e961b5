package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNodesGetHealth: `nodes get` shows the health the node's last
// heartbeat reported, which the API sends inside the node's status (the
// command once read a top-level "healthy" the API never sent, and always
// printed "-").
func TestNodesGetHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/nodes/n2" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"id":"n2","raftAddr":"127.0.0.1:9002","httpAddr":"127.0.0.1:8182","group":"default","subgroup":"",
"state":"ACTIVE","voter":true,"leader":false,"reachable":true,"generation":3,"joinTime":"2026-01-02T15:00:00Z",
"status":{"version":"1.2.0","state":"ACTIVE","healthy":"NOT_HEALTHY","group":"default","subgroup":"",
"supportedPolicyKinds":["toml"],"generation":3,"statistics":{"policyExecutedCount":7,"policyExecutedFailCount":1}},
"appliedIndex":42}`))
	}))
	defer srv.Close()
	code, out, errOut := cli(t, "", "nodes", "get", "--server", srv.URL, "n2")
	if code != exitOK {
		t.Fatalf("nodes get = %d, %s", code, errOut)
	}
	for _, want := range []string{"Version:        1.2.0", "Health:         NOT_HEALTHY", "Applied index:  42", "7 (1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("nodes get does not show %q:\n%s", want, out)
		}
	}
}
