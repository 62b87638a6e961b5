package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/node"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// statusFixture is a three-node cluster's status with a staged generation
// and an invalid one.
const statusFixture = `{"nodeId":"n2","leader":"n1","raftState":"Follower","activeGeneration":2,
"commit":"dir@sha256:babc3ba9b28a716f","author":"Ann Smith <ann@example.com>","servedGeneration":2,
"source":{"commit":"dir@sha256:031a7867c4bc0767","time":"2026-01-02T15:04:09Z"},
"policies":[{"name":"policies/web","etag":"203dc0ba26b818b8","conditions":[
 {"type":"Valid","status":"True","generation":2,"lastTransitionTime":"2026-01-02T15:04:05Z"},
 {"type":"Ready","status":"True","nodeId":"n1","generation":2,"lastTransitionTime":"2026-01-02T15:04:05Z"},
 {"type":"Active","status":"True","generation":2,"lastTransitionTime":"2026-01-02T15:04:06Z"},
 {"type":"Invalid","status":"True","generation":3,"message":"web/policy.toml:3: rule \"typo\": undefined field 'pth'\nsecond","lastTransitionTime":"2026-01-02T15:04:09Z"}]}],
"experiments":[],
"nodes":[
 {"id":"n1","raftAddr":"127.0.0.1:8300","httpAddr":"127.0.0.1:8181","group":"default","subgroup":"default","state":"ACTIVE","voter":true,"leader":true,"reachable":true,"lastHeartbeat":"2026-01-02T15:04:09.5Z","generation":2,"joinTime":"2026-01-02T15:00:00Z","status":{"statistics":{"policyExecutedCount":12,"policyExecutedFailCount":1}}},
 {"id":"n3","raftAddr":"127.0.0.1:8302","httpAddr":"127.0.0.1:8183","group":"default","subgroup":"default","state":"ACTIVE","voter":true,"leader":false,"reachable":true,"lastHeartbeat":"2026-01-02T15:04:09.5Z","generation":1,"joinTime":"2026-01-02T15:00:00Z","appliedIndex":14,"notFollowing":"not following the raft log since 2026-01-02T15:03:40Z: applied index 14, the leader had applied 18 by then"},
 {"id":"n4","raftAddr":"127.0.0.1:8303","httpAddr":"127.0.0.1:8184","group":"default","subgroup":"default","state":"ACTIVE","voter":false,"leader":false,"reachable":false,"generation":1,"joinTime":"2026-01-02T15:00:00Z","loadFailures":[{"generation":2,"errors":["web/policy.toml:9: rule \"r\" is already defined\nat line 9","second"]}]}]}`

func TestStatusExperimentsTable(t *testing.T) {
	// A branch row as the server writes it (the view of a record).
	valid, err := json.Marshal(apiv1.FromBranch("branches/ok", raftstore.BranchRecord{Branch: "ok", HeadCommit: "b2",
		Revision: "ok@sha1:b2", ChangedPolicies: []string{"api", "web"}, Validation: raftstore.Validation{Valid: true}}))
	if err != nil {
		t.Fatal(err)
	}
	// The rows as a client reads them (a kind this build does not know
	// is left out).
	rows := []string{
		`{"name":"branches/feature/x","kind":"branch","headCommit":"b1","changedPolicies":["web"],"validation":{"valid":false,"errors":["web/policy.toml:3: boom"]}}`,
		string(valid),
		`{"name":"canaries/c1","kind":"canary"}`,
		`{"name":"policies/web/experiments/mine","kind":"experiment","etag":"e1","previewed":false,"source":{"kind":"api"}}`,
		`{"name":"policies/web/experiments/pr-7","kind":"experiment","etag":"e7","state":"ACTIVE","previewed":true,"valid":true,"source":{"kind":"pull_request","number":7,"headCommit":"0123456789abcdef"}}`,
		`{"name":"policies/web/experiments/pr-8","kind":"experiment","etag":"e8","state":"SUSPENDED","stopReason":"auto-stopped after 3600s (autoStop.duration)","previewed":true,"valid":false,"source":{"kind":"pull_request","number":8}}`,
	}
	var exps []apiv1.StatusExperiment
	if err := json.Unmarshal([]byte("["+strings.Join(rows, ",")+"]"), &exps); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printExperiments(&out, exps)
	want := `  NAME                           SOURCE           HEAD          CHANGED POLICIES  ETAG  STATE                                                     VALID
  branches/feature/x             branch           b1            web               -     -                                                         no: web/policy.toml:3: boom
  branches/ok                    branch           b2            api,web           -     -                                                         yes
  policies/web/experiments/mine  api              -             -                 e1    - (not previewed)                                         -
  policies/web/experiments/pr-7  pull_request #7  0123456789ab  -                 e7    ACTIVE                                                    yes
  policies/web/experiments/pr-8  pull_request #8  -             -                 e8    SUSPENDED (auto-stopped after 3600s (autoStop.duration))  no
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestStatusText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(statusFixture))
	}))
	defer srv.Close()
	var v apiv1.Status
	if err := json.Unmarshal([]byte(statusFixture), &v); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printStatus(&out, &v, time.Date(2026, 1, 2, 15, 4, 10, 0, time.UTC))
	want := `Cluster
  Node:               n2
  Leader:             n1
  Raft state:         Follower
  Active generation:  2 (dir@sha256:babc3ba9b28a716f)
  Author:             Ann Smith <ann@example.com>
  Served here:        2
  Source:             dir@sha256:031a7867c4bc0767 (read 2026-01-02T15:04:09Z)

Policies
  POLICY        ETAG              CONDITION  GENERATION  NODE  SINCE                 MESSAGE
  policies/web  203dc0ba26b818b8  Valid      2           -     2026-01-02T15:04:05Z
                                  Ready      2           n1    2026-01-02T15:04:05Z
                                  Active     2           -     2026-01-02T15:04:06Z
                                  Invalid    3           -     2026-01-02T15:04:09Z  web/policy.toml:3: rule "typo": undefined field 'pth' (+1 more lines)

Experiments
  none

Nodes
  ID  RAFT ADDRESS    HTTP ADDRESS    GROUP            STATE   ROLE       GENERATION  DECISIONS (FAILED)  LAST HEARTBEAT
  n1  127.0.0.1:8300  127.0.0.1:8181  default/default  ACTIVE  leader     2           12 (1)              2026-01-02T15:04:09Z (500ms ago)
  n3  127.0.0.1:8302  127.0.0.1:8183  default/default  ACTIVE  voter      1           -                   2026-01-02T15:04:09Z (500ms ago)
  n4  127.0.0.1:8303  127.0.0.1:8184  default/default  ACTIVE  non-voter  1           -                   -
  n3 left behind, out of rotation: not following the raft log since 2026-01-02T15:03:40Z: applied index 14, the leader had applied 18 by then
  n4 cannot load generation 2 (left behind, out of rotation): web/policy.toml:9: rule "r" is already defined (+1 more lines)
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	code, stdout, stderr := cli(t, "", "status", "--server", strings.TrimPrefix(srv.URL, "http://"))
	if code != 0 || !strings.Contains(stdout, "policies/web") || stderr != "" {
		t.Errorf("status = %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, "", "status", "--server", srv.URL+"/", "--format", "json")
	if code != 0 || stdout != statusFixture {
		t.Errorf("json = %d %q", code, stdout)
	}
}

func TestStatusErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	code, stdout, stderr := cli(t, "", "status", "--server", dead)
	if code != exitCheck || stdout != "" || !strings.Contains(stderr, "cannot reach "+dead) {
		t.Errorf("unreachable = %d %q %q", code, stdout, stderr)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":404,"status":"NOT_FOUND","message":"no such resource: /v1/status"}}`))
	}))
	defer srv.Close()
	if code, _, stderr := cli(t, "", "status", "--server", srv.URL); code != exitCheck || !strings.Contains(stderr, "no such resource") {
		t.Errorf("404 = %d %q", code, stderr)
	}
	if code, _, _ := cli(t, "", "status", "--format", "yaml"); code != exitUsage {
		t.Errorf("bad format = %d", code)
	}
	if code, _, _ := cli(t, "", "status", "extra"); code != exitUsage {
		t.Errorf("extra argument = %d", code)
	}
}

// TestStatusOfRunningNode asks a real in-process node.
func TestStatusOfRunningNode(t *testing.T) {
	cfg, err := config.Load(writeServeConfig(t, "127.0.0.1:0", "text"))
	if err != nil {
		t.Fatal(err)
	}
	m := &node.Main{Config: cfg, Logger: testlog.New(t)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitReady(t, "http://"+m.Addr())
	code, stdout, stderr := cli(t, "", "status", "--server", m.Addr())
	for _, want := range []string{"Leader:             node-t", "Raft state:         Leader", "policies/web", "Active", "leader"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 || stderr != "" {
		t.Errorf("status = %d %q", code, stderr)
	}
}

// TestStatusSendsTheToken: against a node with tokens, status sends the
// token of the variable --token-env names (RECONCILER_TOKEN by default),
// and without one says which role it lacks.
func TestStatusSendsTheToken(t *testing.T) {
	t.Setenv("RECONCILER_TOKEN", "status-test-admin-token")
	cfg, err := config.Load(writeServeConfig(t, "127.0.0.1:0", "text"))
	if err != nil {
		t.Fatal(err)
	}
	m := &node.Main{Config: cfg, Logger: testlog.New(t)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitReady(t, "http://"+m.Addr())
	if code, stdout, stderr := cli(t, "", "status", "--server", m.Addr()); code != 0 || !strings.Contains(stdout, "node-t") {
		t.Errorf("with the token = %d %q %q", code, stdout, stderr)
	}
	code, _, stderr := cli(t, "", "status", "--server", m.Addr(), "--token-env", "RECONCILER_TEST_UNSET_TOKEN")
	if code != exitCheck || !strings.Contains(stderr, "401") || !strings.Contains(stderr, "reader role") {
		t.Errorf("without a token = %d %q", code, stderr)
	}
}

func TestStatusPreviewRulesTable(t *testing.T) {
	var v apiv1.Status
	if err := json.Unmarshal([]byte(`{"previewRules":[
 {"rule":"deny-v1","name":"policies/web/rules/deny-v1","previewed":true,"stats":{"evaluated":30,"allowToDeny":15,"denyToAllow":0,"ruleChanged":2,"dropped":1}},
 {"rule":"fresh","name":"policies/web/rules/fresh","previewed":true},
 {"rule":"late","name":"policies/web/rules/late","previewed":false,"notPreviewedReason":"over the cap"}]}`), &v); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printPreviewRules(&out, v.PreviewRules)
	want := `  RULE                        EVALUATED                    ALLOW->DENY  DENY->ALLOW  RULE CHANGED  DROPPED
  policies/web/rules/deny-v1  30                           15           0            2             1
  policies/web/rules/fresh    0                            0            0            0             0
  policies/web/rules/late     not previewed: over the cap
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
