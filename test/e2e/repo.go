package e2e

import (
	"fmt"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// probeRule is the rule that answers the probe in tree k.
func probeRule(k int) string { return fmt.Sprintf("probe-%d", k) }

// webPolicy is tree k of the policy web: the probe is decided by rule
// probe-<k> (allowed for even k, denied for odd), so an answer names the
// tree it came from; its test keeps it honest.
func webPolicy(k int) string {
	action := map[bool]string{true: "allow", false: "deny"}[k%2 == 0]
	return fmt.Sprintf(`# tree %[1]d
default_action = "allow"

[[rules]]
name = "probe-%[1]d"
priority = 1
action = %[2]q
match = "request.path == '/probe'"

[[rules]]
name = "deny-admin"
priority = 10
action = "deny"
match = "request.path.startsWith('/admin')"

[[tests]]
name = "admin is denied"
request = { path = "/admin/x" }
expect = "deny"
rule = "deny-admin"
`, k, action)
}

// invalidPolicy has a typo in a field name: validation must refuse it.
const invalidPolicy = `default_action = "allow"

[[rules]]
name = "typo"
priority = 1
action = "deny"
match = "request.pth == '/probe'"
`

// userRepo is the repository on the git server and a user's clone of it.
type userRepo struct {
	t    testing.TB
	srv  *gittest.Server
	URL  string
	work string
}

// newUserRepo starts a git server requiring token, with main at tree 0.
func newUserRepo(t testing.TB, token string) *userRepo {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{Token: token})
	url := srv.InitRepo("policies", map[string]string{"web/policy.toml": webPolicy(0), "README.md": "policies\n"})
	return &userRepo{t: t, srv: srv, URL: url, work: srv.Clone(url)}
}

// push commits files on main in the user's clone and pushes, as `git
// commit -am && git push` would; it returns the commit.
func (r *userRepo) push(files map[string]string, msg string) string {
	r.t.Helper()
	h := r.srv.Commit(r.work, files, msg)
	r.srv.Push(r.work, "main")
	return h
}
