package preview_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// previewRuleTree is a policy whose rule denying /v1 is merged in
// preview: what a team merges to watch before it enforces it.
var previewRuleTree = map[string]string{"web/policy.toml": `default_action = "allow"

[[rules]]
name = "deny-v1"
priority = 1
action = "deny"
match = 'request.path == "/v1"'
preview = true
`}

// TestPreviewRuleAcrossProcesses (issue 24): three `reconciler serve`
// processes serve a policy with a rule in preview. The rule never decides
// (every node answers /v1 ALLOW); each node counts, in its own /metrics,
// the ALLOW->DENY it would have made on the requests it answered; and the
// policy resource of every node shows the counts merged over the
// heartbeats from all three.
func TestPreviewRuleAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	repo := harness.NewRepo(t, harness.RepoOptions{Files: previewRuleTree})
	c := startCluster(t, repo, "", 3)
	var pol struct {
		PreviewRules []struct {
			Rule      string `json:"rule"`
			Previewed bool   `json:"previewed"`
			Stats     *struct {
				AllowToDeny uint64 `json:"allowToDeny"`
				Nodes       []struct {
					Node string `json:"node"`
				} `json:"nodes"`
			} `json:"stats"`
		} `json:"previewRules"`
	}
	for _, n := range c.Nodes {
		harness.WaitFor(t, time.Minute, n.ID+" previewing deny-v1", func() error {
			if code := client.Fetch(t, http.MethodGet, n.Base()+"/v1/policies/web", "", &pol); code != 200 {
				return fmt.Errorf("HTTP %d", code)
			}
			if len(pol.PreviewRules) != 1 || pol.PreviewRules[0].Rule != "deny-v1" || !pol.PreviewRules[0].Previewed {
				return fmt.Errorf("previewRules = %+v", pol.PreviewRules)
			}
			return nil
		})
	}
	// A node evaluates the rule once it has compiled it, off the raft
	// path: ask each node until its own counter moves, then send the rest.
	const perNode = 7
	for _, n := range c.Nodes {
		harness.WaitFor(t, time.Minute, n.ID+" counting the rule", func() error {
			allowV1(t, n)
			if v := ruleCount(t, n); v < 1 {
				return fmt.Errorf("%s counted %d", n.ID, v)
			}
			return nil
		})
		for range perNode {
			allowV1(t, n)
		}
	}
	harness.WaitFor(t, time.Minute, "every node's count merged on every node", func() error {
		var sum uint64
		for _, n := range c.Nodes {
			v := ruleCount(t, n)
			if v < perNode {
				return fmt.Errorf("%s counted %d, want at least %d", n.ID, v, perNode)
			}
			sum += v
		}
		for _, n := range c.Nodes {
			client.Fetch(t, http.MethodGet, n.Base()+"/v1/policies/web", "", &pol)
			if st := pol.PreviewRules[0].Stats; st == nil || st.AllowToDeny != sum || len(st.Nodes) != 3 {
				return fmt.Errorf("%s shows merged stats %+v, want the nodes' %d ALLOW->DENY from 3 nodes", n.ID, st, sum)
			}
		}
		return nil
	})
}

// allowV1 asks n for /v1: ALLOW by the default, whatever is previewed.
func allowV1(t *testing.T, n *harness.Node) {
	t.Helper()
	var d struct{ Decision, Rule string }
	code := client.Fetch(t, http.MethodPost, n.Base()+"/v1/policies/web:evaluate", `{"path":"/v1"}`, &d)
	if code != 200 || d.Decision != "ALLOW" || d.Rule != "" {
		t.Fatalf("live /v1 on %s: %d %+v: a rule in preview decided", n.ID, code, d)
	}
}

// ruleCount is the ALLOW->DENY n's own /metrics counts for deny-v1.
func ruleCount(t *testing.T, n *harness.Node) uint64 {
	t.Helper()
	const series = `reconciler_preview_allow_to_deny_total{experiment="deny-v1",kind="rule",policy="web"} `
	_, metrics, err := client.Do(http.MethodGet, n.Base()+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", n.ID, line, err)
			}
			return uint64(f)
		}
	}
	return 0
}
