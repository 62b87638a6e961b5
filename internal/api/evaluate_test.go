package api

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
)

func TestEvaluate(t *testing.T) {
	e := newTestEnv(t, Config{Now: fixedNow})
	cases := []struct {
		name, path, body string
		decision, rule   string
		hasError         bool
	}{
		{"rule allows", "/v1/policies/web:evaluate", `{"method":"GET","path":"/healthz"}`, "ALLOW", "health", false},
		{"rule denies", "/v1/policies/web:evaluate", `{"method":"GET","path":"/admin/x","attributes":{"tier":"gold"}}`, "DENY", "block-admin", false},
		{"included rule", "/v1/policies/web:evaluate", `{"path":"/x","source_ip":"10.1.9.9","attributes":{"tier":"no"}}`, "ALLOW", "office-network", false},
		{"on_error deny carries the error", "/v1/policies/web:evaluate", `{"path":"/gold"}`, "DENY", "gold-tier", true},
		{"default action", "/v1/policies/web:evaluate", `{"path":"/x","attributes":{"tier":"silver"}}`, "DENY", "", false},
		{"receipt time filled", "/v1/policies/api:evaluate", `{"method":"GET"}`, "DENY", "future", false},
		{"given time kept", "/v1/policies/api:evaluate", `{"method":"GET","time":"2020-01-01T00:00:00Z","headers":{"X-Partner":"acme"}}`, "ALLOW", "", false},
		{"on_error skip", "/v1/policies/api:evaluate", `{"method":"GET","time":"2020-01-01T00:00:00Z"}`, "ALLOW", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := e.post(tc.path, tc.body)
			if a.code != http.StatusOK {
				t.Fatalf("code %d: %s", a.code, a.body)
			}
			m := a.json(t)
			policy := "policies/" + strings.TrimSuffix(strings.TrimPrefix(tc.path, "/v1/policies/"), ":evaluate")
			if m["decision"] != tc.decision || m["rule"] != tc.rule || m["policy"] != policy || m["generation"] != 7.0 {
				t.Errorf("answer = %s", a.body)
			}
			if etag, _ := m["etag"].(string); etag == "" {
				t.Errorf("no etag: %s", a.body)
			}
			if _, has := m["error"]; has != tc.hasError {
				t.Errorf("error present = %v, want %v: %s", has, tc.hasError, a.body)
			}
			if len(m) != 5+btoi(tc.hasError) {
				t.Errorf("unexpected fields: %s", a.body)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestEvaluateMatchesEngineEtag(t *testing.T) {
	e := newTestEnv(t, Config{})
	cp, _ := e.gens.Current().Bundle.Policy("web")
	m := e.post("/v1/policies/web:evaluate", `{"path":"/healthz"}`).json(t)
	if m["etag"] != cp.Etag() {
		t.Errorf("etag %v, want %s", m["etag"], cp.Etag())
	}
}

func TestPinnedGeneration(t *testing.T) {
	e := newTestEnv(t, Config{})
	old := e.gens.Current()
	e.gens.set(&Snapshot{Generation: 8, Commit: "def456", Bundle: old.Bundle})

	for path, gen := range map[string]float64{
		"/v1/generations/7/policies/web:evaluate": 7,
		"/v1/generations/8/policies/web:evaluate": 8,
		"/v1/policies/web:evaluate":               8,
	} {
		a := e.post(path, `{"path":"/healthz"}`)
		if a.code != 200 || a.json(t)["generation"] != gen {
			t.Errorf("%s: %d %s, want generation %v", path, a.code, a.body, gen)
		}
	}
	wantError(t, e.post("/v1/generations/6/policies/web:evaluate", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/generations/x/policies/web:evaluate", `{}`), 400, "INVALID_ARGUMENT")
	wantError(t, e.post("/v1/generations/7/policies/nope:evaluate", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/generations/7/policies/web:mirror", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/generations/7/web:evaluate", `{}`), 404, "NOT_FOUND")
	wantError(t, e.do("GET", "/v1/generations/7/policies/web:evaluate", nil, nil), 405, "UNIMPLEMENTED")
}

func TestEvaluateBadInput(t *testing.T) {
	e := newTestEnv(t, Config{})
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	cases := map[string]string{
		"malformed JSON":     `{"method":`,
		"not an object":      `[1,2]`,
		"empty body":         ``,
		"wrong type":         `{"method":42}`,
		"wrong map type":     `{"headers":{"a":1}}`,
		"null":               `{"groups":null}`,
		"unknown field":      `{"methd":"GET"}`,
		"invalid IP":         `{"source_ip":"10.0.0.300"}`,
		"bad time":           `{"time":"yesterday"}`,
		"trailing data":      `{"method":"GET"} {}`,
		"deeply nested":      `{"attributes":` + deep + `}`,
		"deeply nested list": `{"attributes":{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.post("/v1/policies/web:evaluate", body), 400, "INVALID_ARGUMENT")
			// The server keeps serving.
			if a := e.post("/v1/policies/web:evaluate", `{"path":"/healthz"}`); a.code != 200 {
				t.Fatalf("after bad input: %d %s", a.code, a.body)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	e := newTestEnv(t, Config{MaxBodyBytes: 1 << 20})
	big := `{"attributes":{"x":"` + strings.Repeat("a", 10<<20) + `"}}`
	// Known length: refused before reading.
	wantError(t, e.post("/v1/policies/web:evaluate", big), 413, "RESOURCE_EXHAUSTED")
	// Unknown length (chunked): refused while reading.
	chunked := io.MultiReader(strings.NewReader(big))
	wantError(t, e.do("POST", "/v1/policies/web:evaluate", chunked, nil), 413, "RESOURCE_EXHAUSTED")
	wantError(t, e.do("POST", "/v1/policies/web:mirror", io.MultiReader(strings.NewReader(big)), nil), 413, "RESOURCE_EXHAUSTED")
	if a := e.post("/v1/policies/web:evaluate", `{"path":"/healthz"}`); a.code != 200 {
		t.Fatalf("after a big body: %d %s", a.code, a.body)
	}
	// Just under the limit is read (and then judged on its content).
	small := New(Config{Generations: e.gens, MaxBodyBytes: 64})
	rec := httpRecord(small, "POST", "/v1/policies/web:evaluate", `{"path":"/healthz","attributes":{"x":"`+strings.Repeat("a", 20)+`"}}`)
	if rec.Code != 200 {
		t.Errorf("body under the limit: %d %s", rec.Code, rec.Body)
	}
}

func TestRoutingErrors(t *testing.T) {
	e := newTestEnv(t, Config{})
	wantError(t, e.post("/v1/policies/nope:evaluate", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/policies/Bad_Name:evaluate", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/policies/web:explode", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/policies/web:evaluate/extra", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/policies/web/experiments", `{}`), 404, "NOT_FOUND")
	wantError(t, e.do("GET", "/nope", nil, nil), 404, "NOT_FOUND")
	a := e.do("GET", "/v1/policies/web:evaluate", nil, nil)
	wantError(t, a, 405, "UNIMPLEMENTED")
	if a.header.Get("Allow") != "POST" {
		t.Errorf("Allow = %q", a.header.Get("Allow"))
	}
	wantError(t, e.do("DELETE", "/v1/policies/web", nil, nil), 405, "UNIMPLEMENTED")
	wantError(t, e.do("POST", "/healthz", nil, nil), 405, "UNIMPLEMENTED")
	wantError(t, e.do("PUT", "/v1/policies/web:mirror", nil, nil), 405, "UNIMPLEMENTED")
}

func TestNoGenerationYet(t *testing.T) {
	empty := &fakeGenerations{}
	e := newTestEnv(t, Config{Generations: empty})
	wantError(t, e.post("/v1/policies/web:evaluate", `{}`), 503, "UNAVAILABLE")
	wantError(t, e.post("/v1/generations/1/policies/web:evaluate", `{}`), 503, "UNAVAILABLE")
	wantGatewayAnswer(t, e.do("GET", "/v1/policies/web:authorize", nil, nil), 403, "UNAVAILABLE: ")
	wantError(t, e.post("/v1/policies/web:mirror", `{}`), 503, "UNAVAILABLE")
	wantError(t, e.do("GET", "/v1/policies", nil, nil), 503, "UNAVAILABLE")
	wantError(t, e.do("GET", "/readyz", nil, nil), 503, "UNAVAILABLE")
	if a := e.do("GET", "/healthz", nil, nil); a.code != 200 {
		t.Errorf("healthz = %d", a.code)
	}
	empty.set(e.gens.Current())
	if a := e.do("GET", "/readyz", nil, nil); a.code != 200 || a.json(t)["generation"] != 7.0 {
		t.Errorf("readyz after load = %d %s", a.code, a.body)
	}
}

func TestMirror(t *testing.T) {
	var got []*engine.Request
	var gotPolicy string
	var gotGen uint64
	e := newTestEnv(t, Config{Now: fixedNow, Mirror: mirrorFunc(func(s *Snapshot, p string, r *engine.Request) {
		got, gotPolicy, gotGen = append(got, r), p, s.Generation
	})})
	a := e.post("/v1/policies/web:mirror", `{"method":"PUT","path":"/p"}`)
	if a.code != http.StatusNoContent || len(a.body) != 0 {
		t.Fatalf("mirror = %d %q", a.code, a.body)
	}
	if len(got) != 1 || got[0].Method != "PUT" || gotPolicy != "web" || gotGen != 7 || !got[0].Time.Equal(fixedNow()) {
		t.Errorf("hook got %+v %q %d", got, gotPolicy, gotGen)
	}
	wantError(t, e.post("/v1/policies/nope:mirror", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/policies/web:mirror", `{"x":1}`), 400, "INVALID_ARGUMENT")
	if len(got) != 1 {
		t.Errorf("hook called for refused requests")
	}
	// Without a hook, mirrored requests are counted only.
	e2 := newTestEnv(t, Config{})
	if a := e2.post("/v1/policies/web:mirror", `{}`); a.code != http.StatusNoContent {
		t.Errorf("mirror without hook = %d %s", a.code, a.body)
	}
}

func TestPanicIsAnAIPError(t *testing.T) {
	e := newTestEnv(t, Config{Generations: panicky{}})
	wantError(t, e.post("/v1/policies/web:evaluate", `{}`), 500, "INTERNAL")
	wantError(t, e.do("GET", "/readyz", nil, nil), 500, "INTERNAL")
}

type panicky struct{}

func (panicky) Current() *Snapshot   { panic("boom in a dependency") }
func (panicky) Get(uint64) *Snapshot { panic("boom") }
