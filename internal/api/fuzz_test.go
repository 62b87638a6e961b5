package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/engine"
)

// FuzzEvaluateHandler feeds arbitrary bodies (and a few paths and gateway
// headers) through the handler: it must never panic or answer 5xx, and
// every answer must be a decision or an AIP-193 error.
func FuzzEvaluateHandler(f *testing.F) {
	for _, seed := range []string{
		`{"method":"GET","path":"/healthz"}`,
		`{"source_ip":"10.1.2.3","attributes":{"tier":"gold","n":[1,2,{"a":null}]}}`,
		`{"time":"2020-01-01T00:00:00Z","headers":{"X-A":"b"},"query":{"q":"1"},"groups":["admins"]}`,
		`{"methd":1}`, `[]`, `{`, `null`, `{"attributes":` + strings.Repeat("[", 50), "\xff\xfe",
	} {
		f.Add(seed, uint8(0), "/x", "1.2.3.4")
	}
	f.Add(`{}`, uint8(1), "/a?b=c", "10.1.0.1, 127.0.0.1")
	f.Add(`{}`, uint8(2), "", "")
	f.Add(`{}`, uint8(3), "/%zz", "[::1]:80")

	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 1, Bundle: testBundle(f)})
	srv := New(Config{Generations: gens, Mirror: mirrorFunc(func(*Snapshot, string, *engine.Request) {}), MaxBodyBytes: 1 << 16})
	paths := []string{"/v1/policies/web:evaluate", "/v1/policies/api:authorize", "/v1/policies/web:mirror", "/v1/generations/1/policies/api:evaluate", "/v1/policies/web:mirror/a/b"}

	f.Fuzz(func(t *testing.T, body string, route uint8, uri, xff string) {
		r := httptest.NewRequest(http.MethodPost, paths[int(route)%len(paths)], strings.NewReader(body))
		r.RemoteAddr = "127.0.0.1:9"
		if uri != "" {
			r.Header.Set("X-Original-URI", uri)
		}
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		checkFuzzAnswer(t, rec)
	})
}

func checkFuzzAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	switch {
	case rec.Code >= 500:
		t.Fatalf("server error %d: %s", rec.Code, rec.Body)
	case rec.Code == http.StatusNoContent || rec.Code == http.StatusForbidden || (rec.Code == http.StatusOK && rec.Body.Len() == 0):
		return // mirror, or an authorize answer (headers only)
	case rec.Code == http.StatusOK:
		var d map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || d["decision"] == nil {
			t.Fatalf("decision %q: %v", rec.Body, err)
		}
	default:
		var e struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != rec.Code {
			t.Fatalf("error body %q for %d: %v", rec.Body, rec.Code, err)
		}
	}
}

// FuzzGuard sends arbitrary Authorization, Origin, Host and Content-Type
// headers to every route of the table: nothing panics or answers 5xx,
// and a route that needs a role is passed only with a token of that role
// or above.
func FuzzGuard(f *testing.F) {
	f.Add(uint8(0), "Bearer "+adminToken, "", "127.0.0.1", "application/json")
	f.Add(uint8(14), "Bearer "+writerToken, "https://evil.example", "localhost", "text/plain")
	f.Add(uint8(15), "bearer  "+readerToken, "", "evil.example", "application/json; charset=utf-8")
	f.Add(uint8(20), "Basic x", "null", "[::1]:1", "")
	srv := New(Config{Generations: &fakeGenerations{}, Cluster: &fakeCluster{state: clusterState()},
		Credentials: testCredentials(), LoopbackOnly: true, AllowedOrigins: []string{"https://ok.example"}})
	roles := map[string]auth.Role{adminToken: auth.RoleAdmin, writerToken: auth.RoleWriter, readerToken: auth.RoleReader}
	f.Fuzz(func(t *testing.T, route uint8, authz, origin, host, ct string) {
		rule := routeTable[int(route)%len(routeTable)]
		r := httptest.NewRequest(methodOf(rule), rule.Example, strings.NewReader("{}"))
		r.RemoteAddr = "127.0.0.1:9"
		for k, v := range map[string]string{"Authorization": authz, "Origin": origin, "Content-Type": ct} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		r.Host = host
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s: %d %s", r.Method, rule.Example, rec.Code, rec.Body)
		}
		passed := rec.Code != 401 && rec.Code != 403 && rec.Code != 415
		if !passed || rule.role == auth.RoleNone || rule.class == classDecision {
			return
		}
		token, _ := auth.ParseBearer(authz)
		if roles[token] < rule.role {
			t.Fatalf("%s %s passed with %q: %d %s", r.Method, rule.Example, authz, rec.Code, rec.Body)
		}
	})
}
