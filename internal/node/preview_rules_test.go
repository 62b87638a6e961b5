package node

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// previewRulePolicy is webPolicy(1) with a rule in preview that would deny
// /v1: the rule a team merges to watch before it enforces it.
func previewRulePolicy() string {
	return webPolicy(1) + `
[[rules]]
name = "deny-v1"
priority = 0
action = "deny"
match = 'request.path == "/v1"'
preview = true
`
}

// policyAnswer is the part of a policy resource the tests read.
type policyAnswer struct {
	Rules        []ruleAnswer        `json:"rules"`
	PreviewRules []previewRuleAnswer `json:"previewRules"`
}

// ruleAnswer is a rule of a policy resource.
type ruleAnswer struct {
	Name    string `json:"name"`
	Preview bool   `json:"preview"`
}

// previewRuleAnswer is a rule in preview as the API shows it.
type previewRuleAnswer struct {
	Rule      string `json:"rule"`
	Name      string `json:"name"`
	Previewed bool   `json:"previewed"`
	Stats     *struct {
		Evaluated   uint64 `json:"evaluated"`
		AllowToDeny uint64 `json:"allowToDeny"`
		Nodes       []struct {
			Node      string `json:"node"`
			Evaluated uint64 `json:"evaluated"`
		} `json:"nodes"`
		Samples []map[string]any `json:"samples"`
	} `json:"stats"`
}

// TestPreviewRuleOnEveryNode: a rule merged with preview = true never
// decides on any node of a three-node cluster, is evaluated on every
// node's live traffic, logged in each node's preview log, and its counts,
// merged over the heartbeats, are shown by every node's policy resource.
func TestPreviewRuleOnEveryNode(t *testing.T) {
	c := newTestCluster(t)
	all := []string{"n1", "n2", "n3"}
	for _, id := range all {
		c.start(id, nil)
	}
	c.allServe(1, all...)
	c.write(previewRulePolicy())
	c.reconcile(all[0])
	c.allServe(2, all...)
	c.previewing("web", all...)
	const perNode = 5
	c.allowV1(perNode, all...)
	for _, id := range all {
		var pol policyAnswer
		eventually(t, waitTimeout, "merged counts of the rule on "+id, func() error {
			if code := call(t, http.MethodGet, c.base(id)+"/v1/policies/web", "", &pol); code != 200 {
				return fmt.Errorf("HTTP %d", code)
			}
			if len(pol.PreviewRules) != 1 {
				return fmt.Errorf("previewRules = %+v", pol.PreviewRules)
			}
			st := pol.PreviewRules[0].Stats
			// Evaluated may count the readiness probes' /healthz too.
			if st == nil || st.AllowToDeny != 3*perNode || st.Evaluated < 6*perNode || len(st.Nodes) != 3 {
				return fmt.Errorf("stats = %+v", st)
			}
			return nil
		})
		if !slices.ContainsFunc(pol.Rules, func(r ruleAnswer) bool { return r.Name == "deny-v1" && r.Preview }) {
			t.Errorf("%s: rules = %+v, want deny-v1 with preview", id, pol.Rules)
		}
		if pr := pol.PreviewRules[0]; pr.Rule != "deny-v1" || pr.Name != "policies/web/rules/deny-v1" || !pr.Previewed ||
			pr.Stats.Samples != nil {
			t.Errorf("%s: previewRules = %+v", id, pr)
		}
		var status struct{ PreviewRules []previewRuleAnswer }
		call(t, http.MethodGet, c.base(id)+"/v1/status", "", &status)
		if len(status.PreviewRules) != 1 || status.PreviewRules[0].Stats == nil ||
			status.PreviewRules[0].Stats.AllowToDeny != 3*perNode {
			t.Errorf("%s: /v1/status previewRules = %+v", id, status.PreviewRules)
		}
		_, metrics, err := tryCall(http.MethodGet, c.base(id)+"/metrics", "")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`reconciler_preview_allow_to_deny_total{experiment="deny-v1",kind="rule",policy="web"} %d`, perNode)
		if !strings.Contains(string(metrics), want) {
			t.Errorf("%s: /metrics lacks %s", id, want)
		}
		logData, err := os.ReadFile(filepath.Join(c.configs[id].Node.DataDir, "preview.log"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(logData), `"experiment":"policies/web/rules/deny-v1"`); n < perNode {
			t.Errorf("%s: %d preview log lines of the rule, want at least %d", id, n, perNode)
		}
	}
}

// previewing waits until every listed node previews policy.
func (c *testCluster) previewing(policy string, ids ...string) {
	c.t.Helper()
	eventually(c.t, waitTimeout, policy+" previewed on every node", func() error {
		for _, id := range ids {
			if !c.nodes[id].preview.Previewing(policy) {
				return fmt.Errorf("%s does not preview %s yet", id, policy)
			}
		}
		return nil
	})
}

// allowV1 asks every listed node n times for /v1 (allowed by rule v1 of
// webPolicy(1), whatever is previewed) and for /healthz.
func (c *testCluster) allowV1(n int, ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		for range n {
			if d, code, err := evaluate(c.base(id), "/v1", 0); err != nil || code != 200 || d.Decision != "ALLOW" || d.Rule != "v1" {
				c.t.Fatalf("live /v1 on %s: %+v %d %v", id, d, code, err)
			}
			if d, _, _ := evaluate(c.base(id), "/healthz", 0); d.Decision != "ALLOW" {
				c.t.Fatalf("live /healthz on %s: %+v", id, d)
			}
		}
	}
}
