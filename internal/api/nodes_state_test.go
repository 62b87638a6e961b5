package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// ChangeState of the fake checks the request as the real one does and
// answers that the named node changed.
func (f *fakeCluster) ChangeState(_ context.Context, req cluster.ChangeStateRequest) (cluster.ChangeStateResponse, error) {
	if err := req.Validate(); err != nil {
		return cluster.ChangeStateResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.state.Nodes[req.Name]
	if !ok {
		return cluster.ChangeStateResponse{}, raftstore.ErrUnknownNode
	}
	return cluster.ChangeStateResponse{Changed: []cluster.StateChange{{ID: n.ID, From: n.State, To: req.State}}}, nil
}

func (f *fakeCluster) HealthCheck(_ context.Context, req cluster.HealthCheckRequest) (cluster.HealthCheckResponse, error) {
	scope := cluster.ChangeStateRequest{State: raftstore.NodeActive, Name: req.Name, Group: req.Group, Subgroup: req.Subgroup}
	if err := scope.Validate(); err != nil {
		return cluster.HealthCheckResponse{}, err
	}
	return cluster.HealthCheckResponse{Nodes: []cluster.HealthReport{{ID: "n1", Healthy: cluster.Healthy, Reasons: []string{}}}}, nil
}

func (f *fakeCluster) SelfCheck(context.Context, cluster.SelfCheckRequest) (cluster.HealthReport, error) {
	return cluster.HealthReport{}, nil
}

func (f *fakeCluster) HeldReasons(raftstore.Node, cluster.View) []string { return nil }

// fixedState is an api.NodeState that answers what it holds.
type fixedState struct{ v atomic.Value }

func (s *fixedState) NodeState() raftstore.NodeState { return s.v.Load().(raftstore.NodeState) }

func TestChangeStateNeedsTheToken(t *testing.T) {
	e, _ := newClusterEnv(t, "tok")
	body := `{"state":"PASSIVE","name":"n2"}`
	if a := e.post("/v1/nodes:changeState", body); a.code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s", a.code, a.body)
	}
	a := e.do(http.MethodPost, "/v1/nodes:changeState", strings.NewReader(body), map[string]string{"Authorization": "Bearer tok"})
	var res cluster.ChangeStateResponse
	if err := json.Unmarshal(a.body, &res); a.code != 200 || err != nil || len(res.Changed) != 1 || res.Changed[0].To != raftstore.NodePassive {
		t.Fatalf("with the token: %d %s", a.code, a.body)
	}
	if a := e.do(http.MethodGet, "/v1/nodes:changeState", nil, map[string]string{"Authorization": "Bearer tok"}); a.code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", a.code)
	}
	if a := e.do(http.MethodPost, "/v1/nodes:reboot", strings.NewReader("{}"), map[string]string{"Authorization": "Bearer tok"}); a.code != http.StatusNotFound {
		t.Fatalf("unknown verb: %d", a.code)
	}
}

// TestDecisionsFollowTheNodeState: PASSIVE refuses decisions and
// readiness with 503; TEST answers ALLOW with the decision it would have
// enforced; ACTIVE enforces.
func TestDecisionsFollowTheNodeState(t *testing.T) {
	st := &fixedState{}
	st.v.Store(raftstore.NodePassive)
	e := newTestEnv(t, Config{States: st})
	deny := `{"method":"GET","path":"/admin/x","attributes":{"tier":"gold"}}`
	if a := e.post("/v1/policies/web:evaluate", deny); a.code != 503 || !strings.Contains(string(a.body), "PASSIVE") {
		t.Fatalf("PASSIVE evaluate: %d %s", a.code, a.body)
	}
	if a := e.do(http.MethodGet, "/readyz", nil, nil); a.code != 503 {
		t.Fatalf("PASSIVE readyz: %d", a.code)
	}
	st.v.Store(raftstore.NodeActive)
	a := e.post("/v1/policies/web:evaluate", deny)
	var active map[string]any
	if err := json.Unmarshal(a.body, &active); err != nil || active["decision"] != "DENY" {
		t.Fatalf("the request must be denied when enforced: %s", a.body)
	}
	st.v.Store(raftstore.NodeTest)
	a = e.post("/v1/policies/web:evaluate", deny)
	var test map[string]any
	if err := json.Unmarshal(a.body, &test); err != nil || test["decision"] != "ALLOW" || test["enforced"] != false ||
		test["evaluatedDecision"] != "DENY" {
		t.Fatalf("TEST evaluate: %s (%v)", a.body, err)
	}
	a = e.do(http.MethodGet, "/v1/policies/web:authorize/admin/x", nil, nil)
	if a.code != 200 || a.header.Get("X-Policy-Enforced") != "false" || a.header.Get("X-Policy-Evaluated-Decision") != "DENY" {
		t.Fatalf("TEST authorize: %d %v", a.code, a.header)
	}
}

// FuzzNodesVerbBody: whatever the body of a changeState or healthCheck,
// the answer is the verb's JSON answer, or an AIP-193 error that is not a
// server error.
func FuzzNodesVerbBody(f *testing.F) {
	for _, seed := range []string{
		`{"state":"PASSIVE","name":"n2"}`, `{"state":"TEST","group":"default","subgroup":"default"}`,
		`{"state":"TERMINATED","name":"n1"}`, `{"state":"ACTIVE"}`, `{"state":"SAFE","name":"n1","group":"g"}`,
		`{"state":1}`, `{"state":"ACTIVE","name":"` + strings.Repeat("x", 200) + `"}`, `{"state":"ACTIVE","name":"\xff"}`,
		`[]`, `{`, `null`, ``, `{"state":"ACTIVE","name":"n1"} {}`, `{"group":"default"}`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	srv := New(Config{Generations: &fakeGenerations{}, Cluster: &fakeCluster{state: clusterState()}, MaxBodyBytes: 1 << 12})
	f.Fuzz(func(t *testing.T, body string, health bool) {
		path := "/v1/nodes:changeState"
		if health {
			path = "/v1/nodes:healthCheck"
		}
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		if rec.Code == http.StatusOK {
			var res map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || (res["changed"] == nil && res["nodes"] == nil) {
				t.Fatalf("answer %q: %v", rec.Body, err)
			}
			return
		}
		checkFuzzAnswer(t, rec)
	})
}

// TestDecisionsOnlyForTheNodesGroup: a node in group edge does not answer
// the default group's policies.
func TestDecisionsOnlyForTheNodesGroup(t *testing.T) {
	edge := newTestEnv(t, Config{Group: "edge"})
	if a := edge.post("/v1/policies/web:evaluate", `{}`); a.code != 404 || !strings.Contains(string(a.body), `group \"edge\"`) {
		t.Fatalf("edge node: %d %s", a.code, a.body)
	}
	// The gateway form answers only allow or deny: the failure mode
	// (deny), with the reason in X-Policy-Error.
	if a := edge.do(http.MethodGet, "/v1/policies/web:authorize/x", nil, nil); a.code != 403 ||
		!strings.HasPrefix(a.header.Get("X-Policy-Error"), "NOT_FOUND") || !strings.Contains(a.header.Get("X-Policy-Error"), `group "edge"`) {
		t.Fatalf("edge node authorize: %d %q", a.code, a.header.Get("X-Policy-Error"))
	}
	if a := newTestEnv(t, Config{Group: "default"}).post("/v1/policies/web:evaluate", `{}`); a.code != 200 {
		t.Fatalf("default node: %d %s", a.code, a.body)
	}
}

// TestReadyzOutOfRotationWhenBehind: a node that serves an older
// generation than the active one fails /readyz, unless it is SAFE.
func TestReadyzOutOfRotationWhenBehind(t *testing.T) {
	st := clusterState() // generation 6 active; the env serves 7
	st.Active = 8
	fc := &fakeCluster{state: st}
	states := &fixedState{}
	states.v.Store(raftstore.NodeActive)
	e := newTestEnv(t, Config{Cluster: fc, States: states})
	if a := e.do(http.MethodGet, "/readyz", nil, nil); a.code != 503 || !strings.Contains(string(a.body), "generation 8 is active") {
		t.Fatalf("behind: %d %s", a.code, a.body)
	}
	states.v.Store(raftstore.NodeSafe)
	if a := e.do(http.MethodGet, "/readyz", nil, nil); a.code != 200 {
		t.Fatalf("SAFE behind: %d %s", a.code, a.body)
	}
	states.v.Store(raftstore.NodeActive)
	fc.applied(0)
	fc.mu.Lock()
	fc.state.Active = 7
	fc.mu.Unlock()
	if a := e.do(http.MethodGet, "/readyz", nil, nil); a.code != 200 {
		t.Fatalf("caught up: %d %s", a.code, a.body)
	}
}

// TestStatusSumsStatistics: /v1/status sums the registered nodes' last
// statistics.
func TestStatusSumsStatistics(t *testing.T) {
	st := func(executed, failed uint64) *cluster.NodeStatus {
		return &cluster.NodeStatus{Statistics: cluster.Statistics{PolicyExecutedCount: executed, PolicyExecutedFail: failed}}
	}
	fc := &fakeCluster{state: clusterState(), view: cluster.View{Leader: "n1", Nodes: map[string]cluster.NodeView{
		"n1": {Status: st(10, 1)}, "n2": {Status: st(5, 0)}, "gone": {Status: st(100, 100)}}}}
	e := newTestEnv(t, Config{Cluster: fc})
	var s struct{ Statistics cluster.Statistics }
	if err := json.Unmarshal(e.do(http.MethodGet, "/v1/status", nil, nil).body, &s); err != nil ||
		s.Statistics.PolicyExecutedCount != 15 || s.Statistics.PolicyExecutedFail != 1 {
		t.Fatalf("statistics = %+v %v", s.Statistics, err)
	}
}

// TestLeftBehindNodeSaysWhy: a node that reported the active generation
// failed (the leader promoted without it) fails /readyz with its error,
// and GET /v1/nodes/{id} shows the generation and its errors.
func TestLeftBehindNodeSaysWhy(t *testing.T) {
	st := clusterState() // the env (n2) serves 7
	g := st.Generations[8]
	g.State, g.Files, g.Etags = raftstore.GenerationActive, map[string][]byte{}, map[string]string{"web": "etag-8"}
	g.NodeErrors = map[string][]string{"n2": {`web/policy.toml:9: rule "r" is already defined`, "second"}}
	st.Generations[8] = g
	st.Active, st.Staged = 8, 0
	e := newTestEnv(t, Config{Cluster: &fakeCluster{state: st}})
	a := e.do(http.MethodGet, "/readyz", nil, nil)
	if a.code != 503 || !strings.Contains(string(a.body), `generation 8 is active, which it cannot load (web/policy.toml:9: rule \"r\" is already defined)`) {
		t.Fatalf("readyz: %d %s", a.code, a.body)
	}
	var n struct {
		LoadFailures []apiv1.LoadFailure `json:"loadFailures"`
	}
	if err := json.Unmarshal(e.do(http.MethodGet, "/v1/nodes/n2", nil, nil).body, &n); err != nil ||
		len(n.LoadFailures) != 1 || n.LoadFailures[0].Generation != 8 || len(n.LoadFailures[0].Errors) != 2 {
		t.Fatalf("n2 = %+v %v", n, err)
	}
	n.LoadFailures = nil
	if err := json.Unmarshal(e.do(http.MethodGet, "/v1/nodes/n1", nil, nil).body, &n); err != nil || n.LoadFailures != nil {
		t.Fatalf("n1 = %+v %v", n, err)
	}
}

// TestNodeNotFollowingSaysWhy: a node the leader finds not following the
// raft log fails /readyz with the leader's finding (its own state cannot
// tell it is behind), GET /v1/nodes/{id} shows it, and the node is back in
// rotation once it has applied the entry it was missing.
func TestNodeNotFollowingSaysWhy(t *testing.T) {
	st := clusterState() // the env (n2) serves 7, the active generation
	st.LastIndex = 14
	lag := &cluster.Lag{Since: time.Date(2026, 1, 2, 15, 3, 40, 0, time.UTC), LeaderIndex: 18, AppliedIndex: 14}
	fc := &fakeCluster{state: st, view: cluster.View{Leader: "n1", Nodes: map[string]cluster.NodeView{
		"n2": {AppliedIndex: 14, NotFollowing: lag}}}}
	e := newTestEnv(t, Config{Cluster: fc})
	want := "not following the raft log since 2026-01-02T15:03:40Z: applied index 14, the leader had applied 18 by then"
	if a := e.do(http.MethodGet, "/readyz", nil, nil); a.code != 503 || !strings.Contains(string(a.body), want) {
		t.Fatalf("readyz: %d %s", a.code, a.body)
	}
	var n struct {
		AppliedIndex uint64 `json:"appliedIndex"`
		NotFollowing string `json:"notFollowing"`
	}
	if err := json.Unmarshal(e.do(http.MethodGet, "/v1/nodes/n2", nil, nil).body, &n); err != nil ||
		n.NotFollowing != want || n.AppliedIndex != 14 {
		t.Fatalf("n2 = %+v %v", n, err)
	}
	fc.applied(18) // it caught up before the leader's next answer says so
	if a := e.do(http.MethodGet, "/readyz", nil, nil); a.code != 200 {
		t.Fatalf("caught up: %d %s", a.code, a.body)
	}
}
