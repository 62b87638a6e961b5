package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/console"
)

// TestConsoleAssetsOpenDataGuarded: with tokens configured the console's
// page loads without one (it holds no data) under the strict headers,
// while the API it reads refuses the same caller; a reader token opens
// the data. Writes under /ui/ stay refused.
func TestConsoleAssetsOpenDataGuarded(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{LoopbackOnly: true})
	page := e.do(http.MethodGet, "/ui/", nil, nil)
	if page.code != 200 || page.header.Get("Content-Security-Policy") != console.ContentSecurityPolicy ||
		page.header.Get("X-Content-Type-Options") != "nosniff" || page.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("GET /ui/ without a token: %d %v", page.code, page.header)
	}
	if !strings.Contains(string(page.body), `src="console.js"`) {
		t.Fatalf("GET /ui/ is not the console page: %.200s", page.body)
	}
	for _, p := range []string{statusPath, generationsList, nodesList, "/v1/policies/web"} {
		wantError(t, e.do(http.MethodGet, p, nil, nil), 401, "UNAUTHENTICATED")
		if a := e.do(http.MethodGet, p, nil, bearer(readerToken)); a.code != 200 {
			t.Errorf("GET %s as reader: %d %s", p, a.code, a.body)
		}
	}
	if a := e.do(http.MethodPost, "/ui/", strings.NewReader("{}"), nil); a.code != 401 {
		t.Errorf("POST /ui/ without a token: %d %s", a.code, a.body)
	}
	if a := e.do(http.MethodPost, "/ui/", strings.NewReader("{}"), bearer(adminToken)); a.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/ as admin: %d %s", a.code, a.body)
	}
}

// TestConsoleKeepsBrowserChecks: the console's route runs the API's Host
// (DNS rebinding) and Origin checks like any read.
func TestConsoleKeepsBrowserChecks(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{LoopbackOnly: true})
	wantError(t, e.do(http.MethodGet, "/ui/", nil, map[string]string{"Host": "rebind.example"}), 403, "PERMISSION_DENIED")
	wantError(t, e.do(http.MethodGet, "/ui/console.js", nil, map[string]string{"Origin": "https://evil.example"}), 403, "PERMISSION_DENIED")
	wantError(t, e.do(http.MethodGet, "/ui/", nil, map[string]string{"Sec-Fetch-Site": "cross-site"}), 403, "PERMISSION_DENIED")
}

// TestResourceReadsAnswer304: a resource read carries an ETag and a
// repeat with If-None-Match costs a 304 without a body; a changed
// resource answers 200 with a new tag.
func TestResourceReadsAnswer304(t *testing.T) {
	e, _ := newGuardedEnv(t, Config{})
	auth := bearer(readerToken)
	for _, p := range []string{statusPath, generationsList, nodesList, "/v1/policies/web"} {
		first := e.do(http.MethodGet, p, nil, auth)
		tag := first.header.Get("ETag")
		if first.code != 200 || tag == "" {
			t.Fatalf("GET %s: %d, ETag %q", p, first.code, tag)
		}
		again := e.do(http.MethodGet, p, nil, map[string]string{"Authorization": auth["Authorization"], "If-None-Match": tag})
		if again.code != http.StatusNotModified || len(again.body) != 0 {
			t.Errorf("GET %s with If-None-Match %s: %d %q", p, tag, again.code, again.body)
		}
		other := e.do(http.MethodGet, p, nil, map[string]string{"Authorization": auth["Authorization"], "If-None-Match": `"0000"`})
		if other.code != 200 || other.header.Get("ETag") != tag {
			t.Errorf("GET %s with a stale tag: %d %s", p, other.code, other.header.Get("ETag"))
		}
	}
	before := e.do(http.MethodGet, "/v1/policies/web", nil, auth).header.Get("ETag")
	e.gens.set(&Snapshot{Generation: 8, Commit: "def456", Bundle: testBundle(t)})
	after := e.do(http.MethodGet, "/v1/policies/web", nil, map[string]string{"Authorization": auth["Authorization"], "If-None-Match": before})
	if after.code != 200 || after.header.Get("ETag") == before {
		t.Errorf("after a new generation: %d, ETag %s (was %s)", after.code, after.header.Get("ETag"), before)
	}
}

func TestETagMatches(t *testing.T) {
	for _, c := range []struct {
		header string
		want   bool
	}{{`"a"`, true}, {`W/"a"`, true}, {`"b", "a"`, true}, {`*`, true}, {``, false}, {`"b"`, false}, {`a`, false}} {
		if got := etagMatches(c.header, `"a"`); got != c.want {
			t.Errorf("etagMatches(%q) = %v", c.header, got)
		}
	}
}
