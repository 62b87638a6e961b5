package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestAlertsAndDashboardNameExportedMetrics starts a real node (with
// [tls], so that the certificate series exists), makes it answer a
// decision, an error and a git fetch, scrapes its /metrics, and wants
// every metric that an alert rule or a dashboard query names among the
// scraped ones: a rule on a series nobody exports never fires.
func TestAlertsAndDashboardNameExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := scrapeRealNode(t)
	for _, q := range alertQueries(t) {
		checkNames(t, "deploy/prometheus/alerts.yml "+q.where, q.expr, exported)
	}
	queries := dashboardQueries(t)
	if len(queries) < 10 {
		t.Fatalf("the dashboard has %d queries; want one per panel", len(queries))
	}
	for _, q := range queries {
		checkNames(t, "deploy/grafana/reconciler.json "+q.where, q.expr, exported)
	}
	checkDocumented(t, exported)
}

// checkDocumented wants every reconciler_* family the node exports named
// somewhere in docs/.
func checkDocumented(t *testing.T, exported map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(harness.ModuleRoot(), "docs/*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var docs strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	for name := range exported {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(family, "reconciler_") && !strings.Contains(docs.String(), family) {
			t.Errorf("%s is exported but no page of docs/ names it", family)
		}
	}
}

func checkNames(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s: %s is not exported by a running node (expression %q)", where, n, expr)
		}
	}
}

// scrapeRealNode returns the metric names (histograms' _bucket, _sum and
// _count included) a one-node TLS cluster exports once it has served.
func scrapeRealNode(t *testing.T) map[string]bool {
	t.Helper()
	repo := harness.NewRepo(t, harness.RepoOptions{})
	certDir := filepath.Join(t.TempDir(), "certs")
	c := harness.NewCluster(t, harness.ClusterOptions{Size: 1, Repo: repo, JoinRaft: true,
		Configure: func(cfg *harness.Config) {
			cfg.Extra += fmt.Sprintf("\n[tls]\nca_file = %q\ncert_file = %q\nkey_file = %q\n",
				filepath.Join(certDir, "ca.pem"), filepath.Join(certDir, cfg.ID+".pem"),
				filepath.Join(certDir, cfg.ID+"-key.pem"))
		}})
	for _, args := range [][]string{{"certs", "ca", "--dir", certDir}, {"certs", "node", "--dir", certDir, "--id", c.Nodes[0].ID}} {
		if out, err := exec.Command(c.Bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("reconciler %v: %v\n%s", args, err, out)
		}
	}
	c.StartAll()
	n := c.Nodes[0]
	c.WaitServing(0, nil, harness.PromoteTimeout)
	if _, err := c.Client.Evaluate(context.Background(), n, harness.Policy, harness.ProbeRequest); err != nil {
		t.Fatal(err)
	}
	c.Client.Fetch(t, "GET", n.Base()+"/v1/policies/no-such-policy", "", nil) // an HTTP error
	if err := c.Client.Reconcile(n); err != nil {
		t.Fatal(err)
	}
	code, body, err := c.Client.Get(n.Base() + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return out
}

type query struct{ where, expr string }

// alertQueries reads every rule's expression from the alert rules.
func alertQueries(t *testing.T) []query {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	decodeRepoFile(t, "deploy/prometheus/alerts.yml", yaml.Unmarshal, &f)
	var out []query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, query{r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

// labelValues is a Grafana variable query, label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\(\s*([^,]+),\s*\w+\s*\)$`)

// dashboardQueries reads every panel's target expression, and the
// variables' queries, from the dashboard.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	var d struct {
		Panels     []panel
		Templating struct {
			List []struct{ Name, Type, Query string }
		}
	}
	decodeRepoFile(t, "deploy/grafana/reconciler.json", json.Unmarshal, &d)
	var out []query
	for _, p := range flatten(d.Panels) {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, query{"panel " + p.Title, tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Query)
			continue
		}
		out = append(out, query{"variable " + v.Name, m[1]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

type panel struct {
	Type, Title string
	Targets     []struct{ Expr string }
	Panels      []panel // a collapsed row's
}

func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// TestAlertRulesPromtool checks the rules with promtool and runs their
// unit tests (alerts_test.yml): each alert fires on the series that mean
// trouble and stays silent otherwise.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(harness.ModuleRoot(), "deploy/prometheus")
	out := run(t, dir, "promtool", "check", "rules", "alerts.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules: %s", out)
	}
	run(t, dir, "promtool", "test", "rules", "alerts_test.yml")
	wantAlerts := []string{"ReconcilerGenerationInvalid", "ReconcilerNodeLeftBehind", "ReconcilerPullError",
		"ReconcilerNoLeader", "ReconcilerPreviewDrops", "ReconcilerLowDisk", "ReconcilerCertificateExpiresSoon",
		"ReconcilerHeartbeatMisses"}
	tests, err := os.ReadFile(filepath.Join(dir, "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, q := range alertQueries(t) {
		names[q.where] = true
	}
	for _, a := range wantAlerts {
		if !names[a] {
			t.Errorf("no alert %s in alerts.yml", a)
		}
		if !strings.Contains(string(tests), "alertname: "+a+"\n") {
			t.Errorf("alerts_test.yml does not test %s", a)
		}
	}
}
