package extauthz

import (
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
)

// TestCheckEscapedSlashes (issue 22, finding 8): a Check reads its path
// with the function :authorize uses. "/public%2F..%2Fadmin/users?lang=de"
// was "/public/../admin/users" to the rules, which allowed it as a public
// GET (a backend that decodes "%2F" serves /admin/users); "/\admin\users"
// was not "/admin/users". By default both are denied now as malformed; with
// "unescape" they are "/admin/users", which block-admin denies.
func TestCheckEscapedSlashes(t *testing.T) {
	paths := []string{"/public%2F..%2Fadmin/users?lang=de", "/public%2f..%5cadmin/users?lang=de", `/public/..\admin/users?lang=de`, `/\admin\users`}
	def := newEnv(t, api.FailureModes{})
	unescape := newEnvWith(t, testBundle(t), api.Config{PathEscapedSlashes: engine.UnescapeSlashes})
	for _, p := range paths {
		req := checkReq{method: "GET", path: p, host: "www.example", source: "198.51.100.9"}
		r := def.check(t, req)
		wantAnswer(t, r, false, "", "INVALID_ARGUMENT: ")
		if e := headersOfResponse(r)["x-policy-error"]; !strings.Contains(e, "escaped slash") {
			t.Errorf("%s: x-policy-error %q", p, e)
		}
		wantAnswer(t, unescape.check(t, req), false, "block-admin", "")
	}
}

// TestCheckNoEcho (issue 22, finding 9): a malformed :path is not echoed
// into the answer (headers, status message): its query can hold a
// credential.
func TestCheckNoEcho(t *testing.T) {
	e := newEnv(t, api.FailureModes{})
	for _, c := range []checkReq{
		{method: "GET", path: "/%zz?access_token=SECRET", source: "198.51.100.9"},
		{method: "GET", path: "/a?access_token=SECRET&b=%zz", source: "198.51.100.9"},
		{method: "GET", path: "/a", source: "192.0.2.1", headers: map[string]string{"x-forwarded-for": "SECRET"}},
	} {
		r := e.check(t, c)
		wantAnswer(t, r, false, "", "INVALID_ARGUMENT: ")
		if strings.Contains(r.String(), "SECRET") {
			t.Errorf("%s: the answer echoes the request: %v", c.path, r)
		}
	}
}
