package api

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// mirrorRecorder keeps what the Mirror hook received.
type mirrorRecorder struct {
	mu  sync.Mutex
	got []*engine.Request
}

func (m *mirrorRecorder) Mirror(_ *Snapshot, _ string, r *engine.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, r)
}

// wait returns the requests received once there are at least n, or fails
// the test after 10 s. The gateway forms hand requests over after their
// answer, so a client can see the answer first.
func (m *mirrorRecorder) wait(t *testing.T, n int) []*engine.Request {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		have := len(m.got)
		m.mu.Unlock()
		if have >= n || time.Now().After(deadline) {
			return m.take()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (m *mirrorRecorder) take() []*engine.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.got
	m.got = nil
	return out
}

// TestMirrorGatewayForm: nginx's mirror directive sends a copy of the
// original request (its method, URI and headers, no JSON body); :mirror
// builds the request as :authorize does.
func TestMirrorGatewayForm(t *testing.T) {
	rec := &mirrorRecorder{}
	e := newTestEnv(t, Config{Now: fixedNow, Mirror: rec})
	cases := []struct {
		name           string
		method, path   string
		header         map[string]string
		body           string
		wantMethod     string
		wantPath, want string // want: source IP
	}{
		{"nginx mirror of a GET", "GET", "/v1/policies/web:mirror",
			map[string]string{"X-Original-Method": "GET", "X-Original-URI": "/admin/x?lang=de", "X-Forwarded-For": "10.1.2.3"},
			"", "GET", "/admin/x", "10.1.2.3"},
		{"original POST with its body ignored", "POST", "/v1/policies/web:mirror",
			map[string]string{"X-Original-URI": "/upload", "Content-Type": "text/plain"},
			"not json at all", "POST", "/upload", "127.0.0.1"},
		{"path suffix, original method", "DELETE", "/v1/policies/web:mirror/thing", nil, "", "DELETE", "/thing", "127.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := e.do(tc.method, tc.path, strings.NewReader(tc.body), tc.header)
			if a.code != http.StatusNoContent || len(a.body) != 0 {
				t.Fatalf("mirror = %d %q", a.code, a.body)
			}
			got := rec.take()
			if len(got) != 1 {
				t.Fatalf("hook got %d requests, want 1", len(got))
			}
			r := got[0]
			if r.Method != tc.wantMethod || r.Path != tc.wantPath || r.SourceIP != tc.want || !r.Time.Equal(fixedNow()) {
				t.Errorf("request = %+v", r)
			}
		})
	}
	e.do("GET", "/v1/policies/web:mirror", nil, map[string]string{"X-Original-URI": "/p?lang=xx&lang=de"})
	if got := rec.take(); len(got) != 1 || got[0].Query.Map()["lang"] != "xx" {
		t.Errorf("mirrored %+v, want one request whose lang is the first value", got)
	}
}

// TestMirrorGatewayFormBadInput: a malformed original URI or forwarded
// address is refused, as on :authorize, and never reaches preview.
func TestMirrorGatewayFormBadInput(t *testing.T) {
	rec := &mirrorRecorder{}
	e := newTestEnv(t, Config{Mirror: rec})
	wantError(t, e.do("GET", "/v1/policies/web:mirror", nil, map[string]string{"X-Original-URI": "::not a uri"}), 400, "INVALID_ARGUMENT")
	wantError(t, e.do("GET", "/v1/policies/web:mirror", nil, map[string]string{"X-Original-Method": "GET", "X-Forwarded-For": "nope"}), 400, "INVALID_ARGUMENT")
	wantError(t, e.do("GET", "/v1/policies/nope:mirror", nil, map[string]string{"X-Original-URI": "/"}), 404, "NOT_FOUND")
	// Without X-Original-* or a path suffix, :mirror is the JSON form, POST only.
	wantError(t, e.do("GET", "/v1/policies/web:mirror", nil, nil), 405, "UNIMPLEMENTED")
	if got := rec.take(); len(got) != 0 {
		t.Errorf("refused requests reached preview: %+v", got)
	}
}
