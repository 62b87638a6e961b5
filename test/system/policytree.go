package system

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Policy is the policy every load request is decided by; tree k of it
// answers recognisably (see Expect), so an answer names the tree it came
// from. StablePolicy never changes, so its etag must not either.
const (
	Policy       = "web"
	StablePolicy = "edge"
	// ProbePaths is how many /g<j> paths the load cycles through.
	ProbePaths = 64
)

// Requests are the bodies the load sends to Policy, in a fixed order;
// request i has path RequestPaths[i].
var RequestPaths, Requests = buildRequests()

func buildRequests() ([]string, [][]byte) {
	paths := []string{"/probe", "/admin/users", "/public"}
	for j := range ProbePaths {
		paths = append(paths, fmt.Sprintf("/g%d", j))
	}
	bodies := make([][]byte, len(paths))
	for i, p := range paths {
		bodies[i] = fmt.Appendf(nil, `{"method":"GET","path":%q,"source_ip":"10.0.0.1"}`, p)
	}
	return paths, bodies
}

// ProbeRequest is the request whose rule names the tree: "probe-<k>".
var ProbeRequest = Requests[0]

// Expect is the decision and rule tree k gives for path.
func Expect(k int, path string) (decision, rule string) {
	switch {
	case path == "/probe":
		if k%2 == 0 {
			return "ALLOW", ProbeRule(k)
		}
		return "DENY", ProbeRule(k)
	case strings.HasPrefix(path, "/admin"):
		return "DENY", "deny-admin"
	case path == fmt.Sprintf("/g%d", k):
		return "DENY", fmt.Sprintf("deny-g%d", k)
	}
	return "ALLOW", ""
}

// ProbeRule is the rule that answers ProbeRequest in tree k.
func ProbeRule(k int) string { return fmt.Sprintf("probe-%d", k) }

// TreeOf returns k when rule is ProbeRule(k).
func TreeOf(rule string) (int, bool) {
	var k int
	if _, err := fmt.Sscanf(rule, "probe-%d", &k); err != nil || ProbeRule(k) != rule {
		return 0, false
	}
	return k, true
}

func webPolicy(k int) string {
	probe, _ := Expect(k, "/probe")
	return fmt.Sprintf(`# tree %[1]d, written by the system test
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

[[rules]]
name = "deny-g%[1]d"
priority = 20
action = "deny"
match = "request.path == '/g%[1]d'"
`, k, strings.ToLower(probe))
}

// invalidWebPolicy has a CEL typo (request.pth) that validation must catch.
const invalidWebPolicy = `# an invalid tree, written by the system test
default_action = "allow"

[[rules]]
name = "typo"
priority = 1
action = "deny"
match = "request.pth.startsWith('/admin')"
`

const edgePolicy = `default_action = "deny"

[[rules]]
name = "allow-internal"
priority = 10
action = "allow"
match = "inIpRange(request.source_ip, '10.0.0.0/8')"
`

// PolicyRepo is the policy source of a cluster: Dir is a git work tree
// that every node's git.init_from names, and Bare is the repository that
// git.url names; each write is a file edit in Dir, a commit, and a push to
// Bare, so a leader that reads either one sees it.
type PolicyRepo struct {
	Dir     string
	Bare    string
	Tree    int          // the last valid tree written
	Written map[int]bool // every valid tree written
}

// NewPolicyRepo creates the repository under root with tree 0.
func NewPolicyRepo(t testing.TB, root string) *PolicyRepo {
	t.Helper()
	r := &PolicyRepo{Dir: filepath.Join(root, "policies"), Bare: filepath.Join(root, "policies.git"), Written: map[int]bool{0: true}}
	for _, d := range []string{filepath.Join(r.Dir, Policy), filepath.Join(r.Dir, StablePolicy)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.write(t, filepath.Join(StablePolicy, "policy.toml"), edgePolicy)
	r.write(t, filepath.Join(Policy, "policy.toml"), webPolicy(0))
	r.git(t, root, "init", "-q", "-b", "main", r.Dir)
	r.git(t, root, "init", "-q", "--bare", "-b", "main", r.Bare)
	r.commit(t, "tree 0")
	return r
}

// Write makes tree k the head of main.
func (r *PolicyRepo) Write(t testing.TB, k int) {
	t.Helper()
	r.write(t, filepath.Join(Policy, "policy.toml"), webPolicy(k))
	r.commit(t, fmt.Sprintf("tree %d", k))
	r.Tree, r.Written[k] = k, true
}

// WriteInvalid makes a tree that does not compile the head of main.
func (r *PolicyRepo) WriteInvalid(t testing.TB) {
	t.Helper()
	r.write(t, filepath.Join(Policy, "policy.toml"), invalidWebPolicy)
	r.commit(t, "invalid tree")
}

// write replaces one file atomically, so a leader reading the directory
// never sees half a file.
func (r *PolicyRepo) write(t testing.TB, rel, content string) {
	t.Helper()
	path := filepath.Join(r.Dir, rel)
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (r *PolicyRepo) commit(t testing.TB, msg string) {
	t.Helper()
	r.git(t, r.Dir, "add", "-A")
	r.git(t, r.Dir, "commit", "-q", "-m", msg)
	r.git(t, r.Dir, "push", "-q", "--force", r.Bare, "main")
}

func (r *PolicyRepo) git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(),
		"GIT_AUTHOR_NAME=system test", "GIT_AUTHOR_EMAIL=system@test.invalid",
		"GIT_COMMITTER_NAME=system test", "GIT_COMMITTER_EMAIL=system@test.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
