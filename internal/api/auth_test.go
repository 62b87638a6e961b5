package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// The tokens of the guarded test servers, one per role.
const (
	adminToken  = "admin-token-0123"
	writerToken = "writer-token-0123"
	readerToken = "reader-token-0123"
)

func testCredentials() []auth.Credential {
	return []auth.Credential{
		{Name: "ops", Role: auth.RoleAdmin, Secret: adminToken},
		{Name: "ci", Role: auth.RoleWriter, Secret: writerToken},
		{Name: "dashboard", Role: auth.RoleReader, Secret: readerToken},
	}
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// newGuardedEnv is a node's API with the three role tokens, a cluster, a
// rollback and the audit log in a buffer.
func newGuardedEnv(t *testing.T, cfg Config) (*testEnv, *testlog.Buffer) {
	t.Helper()
	audit := &testlog.Buffer{}
	cfg.Credentials = testCredentials()
	cfg.Audit = hclog.New(&hclog.LoggerOptions{Name: "reconciler.audit", Output: audit, Level: hclog.Info})
	if cfg.Cluster == nil {
		cfg.Cluster = &fakeCluster{state: clusterState()}
	}
	if cfg.Rollback == nil {
		cfg.Rollback = &rollbackFunc{fn: func(RollbackRequest) (RollbackResult, error) {
			return RollbackResult{Target: 5, Commit: "c9"}, nil
		}}
	}
	return newTestEnv(t, cfg), audit
}

func methodOf(rule routeRule) string {
	if rule.Method == "" {
		return http.MethodPost
	}
	return rule.Method
}

// TestRouteTableRoles walks the route table: every route that needs a
// role answers 401 without a credential and with a token that is not
// one of the node's, 403 with a token of the role below, and passes the
// guard (and the handler's own check) with a token of exactly its role.
// The 401 and 403 messages name the role that is missing.
func TestRouteTableRoles(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{})
	tokenOf := map[auth.Role]string{auth.RoleReader: readerToken, auth.RoleWriter: writerToken, auth.RoleAdmin: adminToken}
	for _, rule := range routeTable {
		if got := routeFor(mustRequest(t, methodOf(rule), rule.Example)); got.class != rule.class || got.role != rule.role {
			t.Errorf("%s %s is covered by the rule of %s (%s)", methodOf(rule), rule.Example, got.Example, got.role)
		}
		if rule.role == auth.RoleNone {
			continue
		}
		method := methodOf(rule)
		name := method + " " + rule.Example
		for _, header := range []map[string]string{nil, bearer("not-a-token-of-this-node"), {"Authorization": "Basic " + adminToken}} {
			a := e.do(method, rule.Example, strings.NewReader("{}"), header)
			wantError(t, a, 401, "UNAUTHENTICATED")
			if !strings.Contains(string(a.body), "the "+rule.role.String()+" role") || a.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without the role or the challenge: %s", name, a.body)
			}
		}
		below := tokenOf[rule.role-1]
		if below != "" {
			a := e.do(method, rule.Example, strings.NewReader("{}"), bearer(below))
			wantError(t, a, 403, "PERMISSION_DENIED")
			if !strings.Contains(string(a.body), "needs the "+rule.role.String()+" role") {
				t.Errorf("%s: 403 does not name the role: %s", name, a.body)
			}
		}
		if a := e.do(method, rule.Example, strings.NewReader("{}"), bearer(tokenOf[rule.role])); a.code == 401 || a.code == 403 {
			t.Errorf("%s with a %s token = %d %s", name, rule.role, a.code, a.body)
		}
	}
}

// TestUnlistedRoutesFailClosed: a write nobody put in the route table
// needs an admin, a read a reader.
func TestUnlistedRoutesFailClosed(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		a := e.do(m, "/v1/some-future:endpoint", strings.NewReader("{}"), bearer(writerToken))
		wantError(t, a, 403, "PERMISSION_DENIED")
		if !strings.Contains(string(a.body), "admin role") {
			t.Errorf("%s: %s", m, a.body)
		}
	}
	wantError(t, e.do(http.MethodGet, "/v1/some-future-resource", nil, nil), 401, "UNAUTHENTICATED")
	wantError(t, e.do(http.MethodGet, "/v1/some-future-resource", nil, bearer(readerToken)), 404, "NOT_FOUND")
}

// TestOpenRoutes: decisions, health, readiness and metrics need no token
// while tokens are configured; decision_role closes the data plane.
func TestOpenRoutes(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{})
	for _, p := range []string{"/v1/policies/web:evaluate", "/v1/generations/7/policies/web:evaluate"} {
		if a := e.post(p, `{"path":"/"}`); a.code != 200 {
			t.Errorf("%s = %d %s", p, a.code, a.body)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if a := e.do(http.MethodGet, p, nil, nil); a.code != 200 {
			t.Errorf("%s = %d", p, a.code)
		}
	}
	closed, _ := newGuardedEnv(t, Config{DecisionRole: auth.RoleReader})
	wantError(t, closed.post("/v1/policies/web:evaluate", `{"path":"/"}`), 401, "UNAUTHENTICATED")
	if a := closed.do(http.MethodGet, "/v1/policies/web:authorize/x", nil, bearer(readerToken)); a.code != 200 && a.code != 403 {
		t.Errorf("authorize with a reader = %d %s", a.code, a.body)
	}
	if a := closed.do(http.MethodPost, "/v1/policies/web:evaluate", strings.NewReader(`{"path":"/"}`), bearer(readerToken)); a.code != 200 {
		t.Errorf("evaluate with a reader = %d %s", a.code, a.body)
	}
}

// TestAuditLines: every write, admitted or refused, leaves one audit line
// with the caller's role and token name, never the token.
func TestAuditLines(t *testing.T) {
	e, audit := newGuardedEnv(t, Config{})
	e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"waitSeconds":0}`), bearer(adminToken))
	e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{}`), bearer(readerToken))
	e.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader(`{}`), nil)
	e.do(http.MethodPost, "/v1/webhooks/github", strings.NewReader(`{}`), nil)
	e.do(http.MethodGet, "/v1/status", nil, bearer(readerToken))
	e.post("/v1/policies/web:evaluate", `{"path":"/"}`)
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	want := []string{
		"reconciler.audit: request: method=POST path=/v1/generations:rollback role=admin token=ops remote=127.0.0.1:",
		"reconciler.audit: request: method=POST path=/v1/generations:rollback role=reader token=dashboard remote=127.0.0.1:",
		"reconciler.audit: request: method=POST path=/v1/cluster:reconcile role=none token=- remote=127.0.0.1:",
		"reconciler.audit: request: method=POST path=/v1/webhooks/github role=none token=anonymous remote=127.0.0.1:",
	}
	if len(lines) != len(want) {
		t.Fatalf("audit log has %d lines, want %d (writes only):\n%s", len(lines), len(want), audit.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
	for i, end := range []string{"status=200 admitted=true", "status=403 admitted=false", "status=401 admitted=false",
		"status=404 admitted=true"} {
		if !strings.HasSuffix(lines[i], end) {
			t.Errorf("line %d = %q, want it to end %q", i, lines[i], end)
		}
	}
	for _, secret := range []string{adminToken, writerToken, readerToken} {
		if strings.Contains(audit.String(), secret) {
			t.Errorf("the audit log shows a token: %s", audit.String())
		}
	}
}

// TestAuditLeavesOutNodeChatter: a node's admitted heartbeat or report
// is not an operator's change and would bury them (one a second per
// node); a refused one is logged like any refusal.
func TestAuditLeavesOutNodeChatter(t *testing.T) {
	e, audit := newGuardedEnv(t, Config{})
	e.do(http.MethodPost, "/v1/cluster:heartbeat", strings.NewReader(`{}`), bearer(adminToken))
	e.do(http.MethodPost, "/v1/cluster:propose", strings.NewReader(`{}`), bearer(adminToken))
	if got := audit.String(); got != "" {
		t.Errorf("admitted node chatter was audited:\n%s", got)
	}
	e.do(http.MethodPost, "/v1/cluster:heartbeat", strings.NewReader(`{}`), bearer(readerToken))
	if got := audit.String(); !strings.Contains(got, "path=/v1/cluster:heartbeat role=reader") || !strings.Contains(got, "admitted=false") {
		t.Errorf("a refused heartbeat was not audited:\n%s", got)
	}
}

// TestAuditForwardedByIsNotTheCallersClaim: a client that sets the
// forwarding header cannot write a node's name into the audit log as the
// forwarder; only a node certificate names one.
func TestAuditForwardedByIsNotTheCallersClaim(t *testing.T) {
	e, audit := newGuardedEnv(t, Config{Rollback: &rollbackFunc{fn: func(RollbackRequest) (RollbackResult, error) {
		return RollbackResult{Target: 5, Commit: "c9"}, nil
	}}})
	h := bearer(adminToken)
	h[cluster.ForwardedHeader] = "n1 role=admin " + strings.Repeat("x", 200)
	e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"waitSeconds":0}`), h)
	got := audit.String()
	if strings.Contains(got, "forwarded_by=") || !strings.Contains(got, `forwarded_by_unverified="n1 role=admin xxx`) || strings.Contains(got, strings.Repeat("x", 100)) {
		t.Errorf("audit line for a claimed forwarder:\n%s", got)
	}
}

// TestForwardedWritesCarryTheCallersToken: a follower forwards the
// caller's credential, and the leader judges it again; the node's own
// token is not lent to the caller.
func TestForwardedWritesCarryTheCallersToken(t *testing.T) {
	leaderRB := &rollbackFunc{fn: func(RollbackRequest) (RollbackResult, error) {
		return RollbackResult{Target: 5, Commit: "c9"}, nil
	}}
	leader, leaderAudit := newGuardedEnv(t, Config{Rollback: leaderRB})
	st := clusterState()
	n1 := st.Nodes["n1"]
	n1.HTTPAddr = strings.TrimPrefix(leader.http.URL, "http://")
	st.Nodes["n1"] = n1
	follower, _ := newGuardedEnv(t, Config{Cluster: &fakeCluster{state: st}, Rollback: &rollbackFunc{fn: notLeader}})
	if a := follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"waitSeconds":0}`), bearer(adminToken)); a.code != 200 {
		t.Fatalf("forwarded rollback = %d %s", a.code, a.body)
	}
	if !strings.Contains(leaderAudit.String(), "role=admin token=ops") || !strings.Contains(leaderAudit.String(), "forwarded_by_unverified=n2") {
		t.Errorf("leader's audit: %s", leaderAudit.String())
	}
	// The follower's guard stops a writer; a caller the leader does not
	// know (other tokens there) is stopped on the leader.
	wantError(t, follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{}`), bearer(writerToken)), 403, "PERMISSION_DENIED")
	if n := len(leaderRB.calls); n != 1 {
		t.Errorf("the leader ran %d rollbacks", n)
	}
}

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, "http://127.0.0.1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOpenRoutesIgnoreForeignCredentials: a probe or scraper that sends
// an Authorization header of its own is not refused for it.
func TestOpenRoutesIgnoreForeignCredentials(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{})
	for _, p := range []string{"/healthz", "/metrics"} {
		if a := e.do(http.MethodGet, p, nil, bearer("someone-elses-token")); a.code != 200 {
			t.Errorf("%s = %d %s", p, a.code, a.body)
		}
	}
}
