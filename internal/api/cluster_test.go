package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/version"
)

// fakeCluster is a hand-written Cluster: a fixed state and view, and
// function fields for the writes.
type fakeCluster struct {
	mu        sync.Mutex
	state     *raftstore.State
	view      cluster.View
	join      func(cluster.JoinRequest) (raftstore.Node, error)
	proposed  []raftstore.Command
	reconcile int
	forwarded []bool
	// token is sent on forwarded calls, as the cluster layer's Config.Token.
	token string
}

var _ Cluster = (*fakeCluster)(nil)

func (f *fakeCluster) NodeID() string { return "n2" }

func (f *fakeCluster) Version() version.V { return version.This() }
func (f *fakeCluster) State() *raftstore.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// ForwardedWriteDone: the fake's index; it has no raft to nudge.
func (f *fakeCluster) ForwardedWriteDone(uint64) uint64 { return f.State().LastIndex }

// applied makes the fake's state reach index, as raft would deliver it.
func (f *fakeCluster) applied(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.state.Clone()
	next.LastIndex = index
	f.state = next
}

// IsMember: the nodes of the fake's state, and n1 and n2.
func (f *fakeCluster) IsMember(id string) bool {
	_, ok := f.State().Nodes[id]
	return ok || id == "n1" || id == "n2"
}

func (f *fakeCluster) Leader() string    { return "n1" }
func (f *fakeCluster) RaftState() string { return "Follower" }
func (f *fakeCluster) View() cluster.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view
}

// LeaderURL is the leader n1's registered HTTP address, as a plaintext
// cluster forwards.
func (f *fakeCluster) LeaderURL() (string, bool) {
	n, ok := f.State().Nodes[f.Leader()]
	return "http://" + n.HTTPAddr, ok && n.HTTPAddr != ""
}

func (f *fakeCluster) Join(ctx context.Context, req cluster.JoinRequest) (raftstore.Node, error) {
	f.mu.Lock()
	f.forwarded = append(f.forwarded, cluster.IsForwarded(ctx))
	f.mu.Unlock()
	return f.join(req)
}

func (f *fakeCluster) Leave(context.Context, cluster.LeaveRequest) error {
	return fmt.Errorf("%w: nobody", raftstore.ErrUnknownNode)
}

func (f *fakeCluster) Reconcile(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reconcile++
	return nil
}

func (f *fakeCluster) ProposeCommand(_ context.Context, cmd raftstore.Command) (raftstore.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proposed = append(f.proposed, cmd)
	return raftstore.Result{Index: 42}, nil
}

// OnLeader runs local, and on NOT_LEADER sends call to n1's address in
// the state (when there is one) with the cluster layer's Sender.
func (f *fakeCluster) OnLeader(ctx context.Context, _ time.Duration, local func(context.Context) error,
	call cluster.Call) (*cluster.Answer, error) {
	err := local(ctx)
	if !errors.Is(err, raftstore.ErrNotLeader) || cluster.IsForwarded(ctx) {
		return nil, err
	}
	a, ok, ferr := f.ForwardRead(ctx, call)
	if !ok {
		return nil, err
	}
	return &a, ferr
}

// ForwardRead sends call to n1 when the state gives it an address.
func (f *fakeCluster) ForwardRead(ctx context.Context, call cluster.Call) (cluster.Answer, bool, error) {
	n, ok := f.state.Nodes[f.Leader()]
	if !ok || n.HTTPAddr == "" || cluster.IsForwarded(ctx) {
		return cluster.Answer{}, false, nil
	}
	a, err := cluster.Sender{Self: f.NodeID(), Token: f.token, Client: http.DefaultClient}.Send(ctx, "http://"+n.HTTPAddr, call)
	return a, true, err
}

func (f *fakeCluster) Heartbeat(context.Context, cluster.Heartbeat) (cluster.View, error) {
	return f.view, nil
}

var ts = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// clusterState has generation 6 active (7 served by this env's fake
// generations is irrelevant here), 5 retired, 4 superseded, 7 staged with
// one node ready, and 8 invalid with errors of policy web and a general one.
func clusterState() *raftstore.State {
	st := raftstore.NewState()
	gen := func(n uint64, state raftstore.GenerationState, commit string) raftstore.Generation {
		return raftstore.Generation{Number: n, State: state, Commit: commit, CreateTime: ts, StateTime: ts,
			Etags: map[string]string{"web": fmt.Sprintf("etag-%d", n)}, ReadyNodes: map[string]time.Time{},
			NodeErrors: map[string][]string{}}
	}
	g5 := gen(5, raftstore.GenerationRetired, "c5")
	g5.ActivateTime = ts
	g6 := gen(6, raftstore.GenerationActive, "c6")
	g6.ActivateTime = ts.Add(time.Second)
	g6.ReadyNodes = map[string]time.Time{"n1": ts, "n2": ts}
	g7 := gen(7, raftstore.GenerationStaged, "c7")
	g7.ReadyNodes = map[string]time.Time{"n2": ts}
	g8 := gen(8, raftstore.GenerationInvalid, "c8")
	g8.Etags = map[string]string{}
	g8.LeaderErrors = []string{"web/policy.toml:3: bad", "_shared/x.toml:1: worse"}
	g8.NodeErrors = map[string][]string{"n3": {"boom"}}
	for _, g := range []raftstore.Generation{gen(4, raftstore.GenerationSuperseded, "c4"), g5, g6, g7, g8} {
		st.Generations[g.Number] = g
	}
	st.Active, st.Previous, st.Staged, st.Highest = 6, 5, 7, 8
	st.Nodes["n1"] = raftstore.Node{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1", Group: "default", Subgroup: "default",
		State: raftstore.NodeActive, Voter: true, JoinTime: ts}
	st.Nodes["n2"] = raftstore.Node{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Group: "default", Subgroup: "default",
		State: raftstore.NodeActive, Voter: false, JoinTime: ts}
	return st
}

func newClusterEnv(t *testing.T, token string) (*testEnv, *fakeCluster) {
	fc := &fakeCluster{state: clusterState(), view: cluster.View{Leader: "n1", Nodes: map[string]cluster.NodeView{
		"n1": {LastHeartbeat: ts, Generation: 6, Reachable: true}}}}
	return newTestEnv(t, Config{Cluster: fc, Token: token}), fc
}

func TestStatusResource(t *testing.T) {
	e, _ := newClusterEnv(t, "")
	a := e.do(http.MethodGet, "/v1/status", nil, nil)
	if a.code != 200 {
		t.Fatalf("status = %d %s", a.code, a.body)
	}
	var s struct {
		NodeID, Leader, RaftState, Commit  string
		ActiveGeneration, ServedGeneration uint64
		Experiments                        []any
		Policies                           []struct {
			Name, Etag string
			Conditions []apiv1.Condition
		}
		Nodes []apiv1.Node
	}
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatal(err)
	}
	if s.NodeID != "n2" || s.Leader != "n1" || s.RaftState != "Follower" || s.ActiveGeneration != 6 ||
		s.Commit != "c6" || s.ServedGeneration != 7 || s.Experiments == nil {
		t.Errorf("status = %+v", s)
	}
	if len(s.Policies) != 1 || s.Policies[0].Name != "policies/web" || s.Policies[0].Etag != "etag-6" {
		t.Fatalf("policies = %+v", s.Policies)
	}
	var got []string
	for _, c := range s.Policies[0].Conditions {
		if c.Status != "True" || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %+v", c)
		}
		got = append(got, fmt.Sprintf("%s/%d/%s", c.Type, c.Generation, c.NodeID))
	}
	want := "Valid/6/ Ready/6/n1 Ready/6/n2 Active/6/ Valid/7/ Ready/7/n2 Pending/7/ Invalid/8/"
	if strings.Join(got, " ") != want {
		t.Errorf("conditions:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	inv := s.Policies[0].Conditions[len(got)-1].Message
	for _, part := range []string{"web/policy.toml:3: bad", "_shared/x.toml:1: worse", "node n3: boom"} {
		if !strings.Contains(inv, part) {
			t.Errorf("Invalid message %q lacks %q", inv, part)
		}
	}
	if len(s.Nodes) != 2 || !s.Nodes[0].Leader || !s.Nodes[0].Reachable || s.Nodes[0].Generation != 6 ||
		!s.Nodes[0].LastHeartbeat.Equal(ts) || s.Nodes[1].Voter || s.Nodes[1].Generation != 7 {
		t.Errorf("nodes = %+v", s.Nodes)
	}
	if strings.Contains(string(a.body), `"lastHeartbeat":"0001`) {
		t.Error("an unknown heartbeat is shown as the zero time")
	}
}

func TestStatusPullErrorAndRevert(t *testing.T) {
	st := clusterState()
	fc := &fakeCluster{state: st, view: cluster.View{Source: cluster.SourceStatus{Error: "no such directory", Time: ts}}}
	s := conditions(st, fc.view, nil)
	last := s[0].Conditions[len(s[0].Conditions)-1]
	if last.Type != condPullError || last.Message != "no such directory" {
		t.Errorf("last condition = %+v", last)
	}
	// The source is back at the active commit: the invalid tree is history.
	fc.view = cluster.View{Source: cluster.SourceStatus{Commit: "c6"}}
	for _, c := range conditions(st, fc.view, nil)[0].Conditions {
		if c.Type == condInvalid {
			t.Errorf("Invalid shown after a revert: %+v", c)
		}
	}
}

func TestGenerationResources(t *testing.T) {
	e, _ := newClusterEnv(t, "")
	var list struct{ Generations []apiv1.Generation }
	if a := e.do(http.MethodGet, "/v1/generations", nil, nil); a.code != 200 || json.Unmarshal(a.body, &list) != nil {
		t.Fatalf("list = %d %s", a.code, a.body)
	}
	var states []string
	for _, g := range list.Generations {
		states = append(states, fmt.Sprintf("%d:%s", g.Generation, g.State))
	}
	if strings.Join(states, " ") != "8:INVALID 7:STAGED 6:ACTIVE 5:SUPERSEDED 4:SUPERSEDED" {
		t.Errorf("states = %v", states)
	}
	a := e.do(http.MethodGet, "/v1/generations/5", nil, nil)
	m := a.json(t)
	if m["state"] != "SUPERSEDED" || m["activateTime"] == nil || m["commit"] != "c5" {
		t.Errorf("generation 5 = %s", a.body)
	}
	a = e.do(http.MethodGet, "/v1/generations/4", nil, nil)
	if m := a.json(t); m["activateTime"] != nil || m["readyNodes"] == nil || m["errors"] == nil {
		t.Errorf("generation 4 = %s", a.body)
	}
	a = e.do(http.MethodGet, "/v1/generations/8", nil, nil)
	var g8 apiv1.Generation
	json.Unmarshal(a.body, &g8)
	if len(g8.Errors) != 3 || g8.Errors[2] != "node n3: boom" {
		t.Errorf("generation 8 errors = %q", g8.Errors)
	}
	wantError(t, e.do(http.MethodGet, "/v1/generations/9", nil, nil), 404, "NOT_FOUND")
	wantError(t, e.do(http.MethodGet, "/v1/generations/x", nil, nil), 400, "INVALID_ARGUMENT")
	wantError(t, e.post("/v1/generations/5", "{}"), 405, "UNIMPLEMENTED")
	// Pinned to a generation this node does not keep: the message says which it does.
	a = e.post("/v1/generations/3/policies/web:evaluate", `{"path":"/"}`)
	wantError(t, a, 404, "NOT_FOUND")
	if !strings.Contains(string(a.body), "active generation 7") {
		t.Errorf("not kept = %s", a.body)
	}
}

func TestNodeResources(t *testing.T) {
	e, _ := newClusterEnv(t, "")
	var list struct{ Nodes []apiv1.Node }
	if a := e.do(http.MethodGet, "/v1/nodes", nil, nil); a.code != 200 || json.Unmarshal(a.body, &list) != nil || len(list.Nodes) != 2 {
		t.Fatalf("list = %d %s", a.code, a.body)
	}
	a := e.do(http.MethodGet, "/v1/nodes/n1", nil, nil)
	if m := a.json(t); m["id"] != "n1" || m["raftAddr"] != "r1" || m["httpAddr"] != "h1" || m["state"] != "ACTIVE" ||
		m["voter"] != true || m["lastHeartbeat"] == nil {
		t.Errorf("n1 = %s", a.body)
	}
	wantError(t, e.do(http.MethodGet, "/v1/nodes/n9", nil, nil), 404, "NOT_FOUND")
}

func TestClusterEndpoints(t *testing.T) {
	e, fc := newClusterEnv(t, "")
	fc.join = func(req cluster.JoinRequest) (raftstore.Node, error) {
		if req.ID == "dup" {
			return raftstore.Node{}, fmt.Errorf("%w: dup is a member at r9", raftstore.ErrMembership)
		}
		return raftstore.Node{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, Voter: req.Voter}, nil
	}
	a := e.do(http.MethodPost, "/v1/cluster:join", strings.NewReader(`{"id":"n3","raftAddr":"r3","httpAddr":"h3","voter":true}`),
		map[string]string{cluster.ForwardedHeader: "n1"})
	if m := a.json(t); a.code != 200 || m["id"] != "n3" || m["voter"] != true {
		t.Errorf("join = %d %s", a.code, a.body)
	}
	if len(fc.forwarded) != 1 || !fc.forwarded[0] {
		t.Error("the forwarded mark did not reach the cluster layer")
	}
	a = e.post("/v1/cluster:join", `{"id":"dup","raftAddr":"r3","httpAddr":"h3"}`)
	wantError(t, a, 409, "ALREADY_EXISTS")
	if !strings.Contains(string(a.body), `"reason":"MEMBERSHIP_CONFLICT","domain":"reconciler"`) {
		t.Errorf("no reason in %s", a.body)
	}
	wantError(t, e.post("/v1/cluster:join", `{"id":"x","extra":1}`), 400, "INVALID_ARGUMENT")
	wantError(t, e.post("/v1/cluster:join", `{"id":"x"} {}`), 400, "INVALID_ARGUMENT")
	wantError(t, e.post("/v1/cluster:leave", `{"id":"nobody"}`), 404, "NOT_FOUND")
	if a := e.post("/v1/cluster:reconcile", ""); a.code != 202 || fc.reconcile != 1 {
		t.Errorf("reconcile = %d %s", a.code, a.body)
	}
	a = e.post("/v1/cluster:propose", `{"type":2,"version":1,"payload":{"generation":1,"nodeId":"n2","time":"2026-01-02T15:04:05Z"}}`)
	if m := a.json(t); a.code != 200 || m["index"] != 42.0 || len(fc.proposed) != 1 {
		t.Errorf("propose = %d %s", a.code, a.body)
	}
	if a := e.post("/v1/cluster:heartbeat", `{"id":"n2","generation":6}`); a.code != 200 || a.json(t)["leader"] != "n1" {
		t.Errorf("heartbeat = %d %s", a.code, a.body)
	}
	wantError(t, e.do(http.MethodGet, "/v1/cluster:reconcile", nil, nil), 405, "UNIMPLEMENTED")
	wantError(t, e.post("/v1/cluster:explode", "{}"), 404, "NOT_FOUND")
}

func TestClusterEndpointsNeedTheToken(t *testing.T) {
	e, fc := newClusterEnv(t, "s3cret")
	for _, auth := range []string{"", "Bearer nope", "s3cret", "Basic s3cret"} {
		a := e.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader("{}"), map[string]string{"Authorization": auth})
		wantError(t, a, 401, "UNAUTHENTICATED")
		if a.header.Get("WWW-Authenticate") == "" {
			t.Error("no WWW-Authenticate")
		}
	}
	a := e.do(http.MethodPost, "/v1/cluster:reconcile", strings.NewReader("{}"), map[string]string{"Authorization": "Bearer s3cret"})
	if a.code != 202 || fc.reconcile != 1 {
		t.Errorf("with the token = %d %s", a.code, a.body)
	}
	// Once tokens are configured, reading needs one too; decisions never do.
	wantError(t, e.do(http.MethodGet, "/v1/status", nil, nil), 401, "UNAUTHENTICATED")
	if a := e.do(http.MethodGet, "/v1/status", nil, map[string]string{"Authorization": "Bearer s3cret"}); a.code != 200 {
		t.Errorf("status = %d", a.code)
	}
	if a := e.post("/v1/policies/web:evaluate", `{"path":"/"}`); a.code != 200 {
		t.Errorf("decision = %d", a.code)
	}
}

func TestClusterRoutesWithoutCluster(t *testing.T) {
	e := newTestEnv(t, Config{})
	for _, p := range []string{"/v1/status", "/v1/generations", "/v1/generations/7", "/v1/nodes", "/v1/nodes/n1"} {
		wantError(t, e.do(http.MethodGet, p, nil, nil), 404, "NOT_FOUND")
	}
	wantError(t, e.post("/v1/cluster:join", "{}"), 404, "NOT_FOUND")
	// Pinned decisions still work from the generations alone.
	if a := e.post("/v1/generations/7/policies/web:evaluate", `{"path":"/"}`); a.code != 200 {
		t.Errorf("pinned = %d %s", a.code, a.body)
	}
}

func TestRemoteErrorsKeepTheirStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		status string
	}{
		{&cluster.RemoteError{Code: 409, Status: "ALREADY_EXISTS", Message: "m"}, 409, "ALREADY_EXISTS"},
		{cluster.ErrNoLeader, 503, "UNAVAILABLE"},
		{fmt.Errorf("x: %w", cluster.ErrForward), 503, "UNAVAILABLE"},
		{fmt.Errorf("x: %w", cluster.ErrRaftUnreachable), 400, "FAILED_PRECONDITION"},
		{fmt.Errorf("%w: %w: x", raftstore.ErrRejected, raftstore.ErrUnknownNode), 404, "NOT_FOUND"},
		{fmt.Errorf("%w: %w: x", raftstore.ErrRejected, raftstore.ErrGenerationState), 400, "FAILED_PRECONDITION"},
	} {
		v := classify(tc.err)
		if code, status := v.http, v.code.String(); code != tc.code || status != tc.status {
			t.Errorf("%v: %d %s, want %d %s", tc.err, code, status, tc.code, tc.status)
		}
	}
}

// TestReadyOnlyFromTheServingGroup: a node compiles only its group's
// policies, so a policy's Ready conditions name only the nodes of the
// group that serves it (a policy whose group is unknown here: every node).
func TestReadyOnlyFromTheServingGroup(t *testing.T) {
	st := raftstore.NewState()
	g := raftstore.Generation{Number: 1, State: raftstore.GenerationActive, Commit: "c1", CreateTime: ts,
		Etags:      map[string]string{"web": "e1", "edge-only": "e2", "fresh": "e3"},
		ReadyNodes: map[string]time.Time{"n1": ts, "n4": ts}}
	st.Generations[1], st.Active, st.Highest = g, 1, 1
	st.Nodes["n1"] = raftstore.Node{ID: "n1", Group: "default"}
	st.Nodes["n4"] = raftstore.Node{ID: "n4", Group: "edge"}
	groups := map[string]string{"web": "default", "edge-only": "edge"}
	groupOf := func(name string) (string, bool) { g, ok := groups[name]; return g, ok }
	got := map[string][]string{}
	for _, p := range conditions(st, cluster.View{}, groupOf) {
		for _, c := range p.Conditions {
			if c.Type == condReady {
				got[p.Name] = append(got[p.Name], c.NodeID)
			}
		}
	}
	want := map[string][]string{"policies/web": {"n1"}, "policies/edge-only": {"n4"}, "policies/fresh": {"n1", "n4"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ready %v, want %v", got, want)
	}
}
