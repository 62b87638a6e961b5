package preview_test

import (
	"fmt"
	"net/http"
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
	const perNode = 7
	for _, n := range c.Nodes {
		for range perNode {
			var d struct{ Decision, Rule string }
			code := client.Fetch(t, http.MethodPost, n.Base()+"/v1/policies/web:evaluate", `{"path":"/v1"}`, &d)
			if code != 200 || d.Decision != "ALLOW" || d.Rule != "" {
				t.Fatalf("live /v1 on %s: %d %+v: a rule in preview decided", n.ID, code, d)
			}
		}
	}
	want := fmt.Sprintf(`reconciler_preview_allow_to_deny_total{experiment="deny-v1",kind="rule",policy="web"} %d`, perNode)
	for _, n := range c.Nodes {
		harness.WaitFor(t, time.Minute, n.ID+"'s own count and the merged one", func() error {
			_, metrics, err := client.Do(http.MethodGet, n.Base()+"/metrics", "")
			if err != nil {
				return err
			}
			if !strings.Contains(string(metrics), want) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
			client.Fetch(t, http.MethodGet, n.Base()+"/v1/policies/web", "", &pol)
			if st := pol.PreviewRules[0].Stats; st == nil || st.AllowToDeny != 3*perNode || len(st.Nodes) != 3 {
				return fmt.Errorf("merged stats %+v, want %d ALLOW->DENY from 3 nodes", st, 3*perNode)
			}
			return nil
		})
	}
}
