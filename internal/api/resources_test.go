package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestListAndGetPolicies(t *testing.T) {
	e := newTestEnv(t, Config{})
	a := e.do("GET", "/v1/policies", nil, nil)
	if a.code != 200 {
		t.Fatalf("list = %d %s", a.code, a.body)
	}
	var list struct {
		Policies []map[string]any `json:"policies"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Policies) != 2 || list.Policies[0]["name"] != "policies/api" || list.Policies[1]["name"] != "policies/web" {
		t.Fatalf("list = %s", a.body)
	}

	a = e.do("GET", "/v1/policies/web", nil, nil)
	if a.code != 200 {
		t.Fatalf("get = %d %s", a.code, a.body)
	}
	m := a.json(t)
	cp, _ := e.gens.Current().Bundle.Policy("web")
	if m["name"] != "policies/web" || m["etag"] != cp.Etag() || m["generation"] != 7.0 || m["commit"] != "abc123" ||
		m["default_action"] != "deny" || m["on_error"] != "deny" || m["group"] != "default" {
		t.Errorf("policy = %s", a.body)
	}
	rules, _ := m["rules"].([]any)
	if len(rules) != 5 {
		t.Fatalf("rules = %v", m["rules"])
	}
	first, _ := rules[0].(map[string]any)
	if first["name"] != "health" || first["priority"] != 1.0 || first["action"] != "allow" || !strings.Contains(first["match"].(string), "/healthz") {
		t.Errorf("first rule = %v", first)
	}
	if tests, _ := m["tests"].([]any); len(tests) != 2 {
		t.Errorf("tests = %v", m["tests"])
	}
	if a := e.do("HEAD", "/v1/policies/web", nil, nil); a.code != 200 || len(a.body) != 0 {
		t.Errorf("HEAD = %d %q", a.code, a.body)
	}
	wantError(t, e.do("GET", "/v1/policies/nope", nil, nil), 404, "NOT_FOUND")
	wantError(t, e.do("POST", "/v1/policies", nil, nil), 405, "UNIMPLEMENTED")
}

func TestHealth(t *testing.T) {
	e := newTestEnv(t, Config{})
	if a := e.do("GET", "/healthz", nil, nil); a.code != 200 || a.json(t)["status"] != "SERVING" {
		t.Errorf("healthz = %d %s", a.code, a.body)
	}
	if a := e.do("GET", "/readyz", nil, nil); a.code != 200 || a.json(t)["status"] != "READY" {
		t.Errorf("readyz = %d %s", a.code, a.body)
	}
}

func TestMetricsExposition(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.post("/v1/policies/web:evaluate", `{"path":"/healthz"}`)
	e.post("/v1/policies/web:evaluate", `{"path":"/admin"}`)
	e.do("GET", "/v1/policies/web:authorize/healthz", nil, nil)
	e.post("/v1/policies/web:mirror", `{}`)
	e.post("/v1/policies/nope:evaluate", `{}`)
	e.post("/v1/policies/web:evaluate", `{bad`)

	a := e.do("GET", "/metrics", nil, nil)
	if a.code != 200 {
		t.Fatalf("metrics = %d", a.code)
	}
	body := string(a.body)
	for _, want := range []string{
		`reconciler_decisions_total{decision="ALLOW",policy="web"} 2`,
		`reconciler_decisions_total{decision="DENY",policy="web"} 1`,
		`reconciler_decision_duration_seconds_count{policy="web"} 3`,
		`reconciler_mirror_total{policy="web"} 1`,
		`reconciler_active_generation 7`,
		`reconciler_http_errors_total{code="400"} 1`,
		`reconciler_http_errors_total{code="404"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, `policy="nope"`) {
		t.Error("unknown policies must not create series")
	}
	if e.srv.Registry() == nil {
		t.Error("no registry")
	}
}
