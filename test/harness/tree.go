package harness

import (
	"fmt"
	"strings"
)

// The policy trees the tests promote. Tree k holds two policies: Policy,
// whose answers name k (the probe is decided by rule "probe-<k>"), so any
// answer tells which tree, and so which promotion, it came from; and
// StablePolicy, which never changes, so its etag must not either.
const (
	Policy       = "web"
	StablePolicy = "edge"
	// ProbePaths is how many /g<j> paths Requests cycles through.
	ProbePaths = 64
)

// RequestPaths and Requests are request bodies for Policy in a fixed
// order; Requests[i] asks for RequestPaths[i]. Request 0 is the probe.
var RequestPaths, Requests = buildRequests()

func buildRequests() ([]string, []string) {
	paths := []string{"/probe", "/admin/users", "/public"}
	for j := range ProbePaths {
		paths = append(paths, fmt.Sprintf("/g%d", j))
	}
	bodies := make([]string, len(paths))
	for i, p := range paths {
		bodies[i] = fmt.Sprintf(`{"method":"GET","path":%q,"source_ip":"10.0.0.1"}`, p)
	}
	return paths, bodies
}

// ProbeRequest is the request whose rule names the tree: ProbeRule(k).
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

// Tree is the repository files of tree k.
func Tree(k int) map[string]string {
	return map[string]string{Policy + "/policy.toml": WebPolicy(k), StablePolicy + "/policy.toml": EdgePolicy}
}

// WebPolicy is Policy in tree k; its own test keeps it honest.
func WebPolicy(k int) string {
	probe, _ := Expect(k, "/probe")
	return fmt.Sprintf(`# tree %[1]d, written by the tests
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

[[tests]]
name = "admin is denied"
request = { path = "/admin/x" }
expect = "deny"
rule = "deny-admin"
`, k, strings.ToLower(probe))
}

// InvalidWebPolicy has a CEL typo (request.pth) that validation must
// catch: a generation of it is INVALID and its errors name "pth".
const InvalidWebPolicy = `# an invalid tree, written by the tests
default_action = "allow"

[[rules]]
name = "typo"
priority = 1
action = "deny"
match = "request.pth.startsWith('/admin')"
`

// EdgePolicy is StablePolicy in every tree.
const EdgePolicy = `default_action = "deny"

[[rules]]
name = "allow-internal"
priority = 10
action = "allow"
match = "inIpRange(request.source_ip, '10.0.0.0/8')"
`
