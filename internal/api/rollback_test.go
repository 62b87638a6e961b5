package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// rollbackFunc adapts a function to Rollbacker and counts its calls.
type rollbackFunc struct {
	mu    sync.Mutex
	calls []RollbackRequest
	fn    func(RollbackRequest) (RollbackResult, error)
}

func (r *rollbackFunc) Rollback(_ context.Context, req RollbackRequest) (RollbackResult, error) {
	r.mu.Lock()
	r.calls = append(r.calls, req)
	r.mu.Unlock()
	return r.fn(req)
}

// errCannotRollBack stands for the leader loop's refusal (a
// FAILED_PRECONDITION made where it happens).
var errCannotRollBack = errs.Sentinel(errs.FailedPrecondition, "cannot roll back")

func notLeader(RollbackRequest) (RollbackResult, error) {
	return RollbackResult{}, fmt.Errorf("%w: follower", raftstore.ErrNotLeader)
}

func TestRollbackOnTheLeader(t *testing.T) {
	rb := &rollbackFunc{fn: func(req RollbackRequest) (RollbackResult, error) {
		return RollbackResult{Target: 5, TargetCommit: "c5", Commit: "c9", Revision: "main@sha1:c9",
			Message: "Revert to generation 5 (c5)", Generation: 9, State: raftstore.GenerationRetired,
			PullRequestURL: "https://github.com/o/r/pull/3"}, nil
	}}
	e := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}, Rollback: rb, Token: "tok"})
	wantError(t, e.post("/v1/generations:rollback", `{}`), http.StatusUnauthorized, "UNAUTHENTICATED")
	auth := map[string]string{"Authorization": "Bearer tok"}
	a := e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":5,"waitSeconds":2.5}`), auth)
	if a.code != 200 {
		t.Fatalf("rollback = %d %s", a.code, a.body)
	}
	var res apiv1.Rollback
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.TargetGeneration != 5 || res.Commit != "c9" || res.Generation != 9 || res.State != "SUPERSEDED" ||
		res.Message != "Revert to generation 5 (c5)" || res.Revision != "main@sha1:c9" ||
		!strings.Contains(string(a.body), `"pullRequestUrl":"https://github.com/o/r/pull/3"`) {
		t.Errorf("answer = %s", a.body)
	}
	if got := rb.calls[0]; got.Generation != 5 || got.Wait != 2500*time.Millisecond {
		t.Errorf("request = %+v", got)
	}
	e.do(http.MethodPost, "/v1/generations:rollback", nil, auth)
	if got := rb.calls[1]; got.Generation != 0 || got.Wait != defaultRollbackWait {
		t.Errorf("default request = %+v", got)
	}
	for body, status := range map[string]string{`{"generation":-1}`: "INVALID_ARGUMENT", `{"gen":1}`: "INVALID_ARGUMENT",
		`{"waitSeconds":1000}`: "INVALID_ARGUMENT"} {
		wantError(t, e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(body), auth), 400, status)
	}
	wantError(t, e.do(http.MethodGet, "/v1/generations:rollback", nil, auth), http.StatusMethodNotAllowed, "UNIMPLEMENTED")
}

func TestRollbackErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		status string
	}{
		{fmt.Errorf("%w: generation 99", raftstore.ErrUnknownGeneration), 404, "NOT_FOUND"},
		{fmt.Errorf("%w: no previous generation", errCannotRollBack), 400, "FAILED_PRECONDITION"},
		{fmt.Errorf("%w: GH006: Protected branch update failed", gitsource.ErrPushRefused), 400, "FAILED_PRECONDITION"},
		{&gitsource.RemoteError{Op: "fetch", URL: "https://h/r.git", Reason: gitsource.ReasonNetwork, Msg: "refused"}, 503, "UNAVAILABLE"},
		{fmt.Errorf("%w: forwarded to the wrong node", raftstore.ErrNotLeader), 503, "UNAVAILABLE"},
	} {
		rb := &rollbackFunc{fn: func(RollbackRequest) (RollbackResult, error) {
			return RollbackResult{}, tc.err
		}}
		e := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}, Rollback: rb})
		a := e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{}`), map[string]string{cluster.ForwardedHeader: "n3"})
		wantError(t, a, tc.code, tc.status)
		if !strings.Contains(string(a.body), strings.SplitN(tc.err.Error(), ":", 2)[0]) {
			t.Errorf("%v: message lost: %s", tc.err, a.body)
		}
	}
	// Without a rollback (or a cluster) the resource does not exist.
	e := newTestEnv(t, Config{})
	wantError(t, e.post("/v1/generations:rollback", `{}`), 404, "NOT_FOUND")
}

// TestRollbackForwarded: a follower forwards to the leader's HTTP address
// with the token and the forwarded mark, and answers with the leader's
// answer, errors included.
func TestRollbackForwarded(t *testing.T) {
	leaderRB := &rollbackFunc{fn: func(req RollbackRequest) (RollbackResult, error) {
		if req.Generation == 3 {
			return RollbackResult{}, fmt.Errorf("%w: generation 3 is INVALID", errCannotRollBack)
		}
		return RollbackResult{Target: 5, Commit: "c9", Generation: 9, State: raftstore.GenerationActive}, nil
	}}
	var seen []string
	var mu sync.Mutex
	leader := newTestEnv(t, Config{Cluster: &fakeCluster{state: clusterState()}, Rollback: leaderRB, Token: "tok"})
	watched := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get(cluster.ForwardedHeader)+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
		leader.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(watched.Close)
	st := clusterState()
	n1 := st.Nodes["n1"]
	n1.HTTPAddr = strings.TrimPrefix(watched.URL, "http://")
	st.Nodes["n1"] = n1
	follower := newTestEnv(t, Config{Cluster: &fakeCluster{state: st, token: "tok"}, Rollback: &rollbackFunc{fn: notLeader}, Token: "tok"})
	auth := map[string]string{"Authorization": "Bearer tok"}
	a := follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":5}`), auth)
	if a.code != 200 || !strings.Contains(string(a.body), `"commit":"c9"`) || !strings.Contains(string(a.body), `"state":"ACTIVE"`) {
		t.Fatalf("forwarded rollback = %d %s", a.code, a.body)
	}
	if len(seen) != 1 || seen[0] != "n2|Bearer tok" {
		t.Errorf("the leader saw %q", seen)
	}
	a = follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":3}`), auth)
	wantError(t, a, 400, "FAILED_PRECONDITION")
	if !strings.Contains(string(a.body), "INVALID") {
		t.Errorf("the leader's message is lost: %s", a.body)
	}
	// A leader that cannot be reached.
	n1.HTTPAddr = "127.0.0.1:1"
	st.Nodes["n1"] = n1
	wantError(t, follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{}`), auth), 503, "UNAVAILABLE")
}

func TestStatusShowsReplicatedSourceAndBranches(t *testing.T) {
	st := clusterState()
	st.Sources[raftstore.SourceGit] = reconcile.SourceRecord{URL: "https://h/r.git",
		Error: "git fetch https://h/r.git: timeout: …", Reason: "timeout", Since: ts}
	st.Branches["feature/x"] = reconcile.BranchRecord{Branch: "feature/x", HeadCommit: "b1", Revision: "feature/x@sha1:b1",
		ChangedPolicies: []string{"web"}, Validation: reconcile.BranchValidation{Valid: true, Errors: []string{}}}
	for _, x := range []*preview.Experiment{
		{Name: "policies/web/experiments/pr-7", Etag: "e7", Previewed: true,
			PreviewMetadata: &preview.Metadata{State: preview.Active},
			Source:          preview.Source{Kind: preview.SourcePullRequest, Number: 7, HeadCommit: "h7"}},
		{Name: "policies/web/experiments/mine", Etag: "e1", Source: preview.Source{Kind: preview.SourceAPI}},
	} {
		p, err := x.PutPayload()
		if err != nil {
			t.Fatal(err)
		}
		st.Experiments[p.Name] = raftstore.Experiment{Name: p.Name, Data: p.Data}
	}
	// A follower that has no view from the leader yet still shows both.
	e := newTestEnv(t, Config{Cluster: &fakeCluster{state: st}, Records: reconcile.StatusRecords{}})
	var s struct {
		Source      cluster.SourceStatus
		Experiments []map[string]any
		Policies    []struct{ Conditions []apiv1.Condition }
	}
	if err := json.Unmarshal(e.do(http.MethodGet, "/v1/status", nil, nil).body, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Source.Error, "timeout") || !s.Source.Time.Equal(ts) {
		t.Errorf("source = %+v", s.Source)
	}
	conds := s.Policies[0].Conditions
	if last := conds[len(conds)-1]; last.Type != condPullError || !strings.Contains(last.Message, "timeout") {
		t.Errorf("last condition = %+v", last)
	}
	if len(s.Experiments) != 3 || s.Experiments[0]["name"] != "branches/feature/x" || s.Experiments[0]["kind"] != "branch" ||
		fmt.Sprint(s.Experiments[0]["changedPolicies"]) != "[web]" {
		t.Fatalf("experiments = %v", s.Experiments)
	}
	// The branch row is what it was when the record was its JSON.
	if got, _ := json.Marshal(s.Experiments[0]); string(got) != `{"branch":"feature/x","changedPolicies":["web"],"headCommit":"b1",`+
		`"kind":"branch","name":"branches/feature/x","revision":"feature/x@sha1:b1","validation":{"errors":[],"valid":true}}` {
		t.Errorf("branch row = %s", got)
	}
	mine, pr := s.Experiments[1], s.Experiments[2]
	if mine["name"] != "policies/web/experiments/mine" || mine["kind"] != "experiment" || mine["etag"] != "e1" ||
		mine["previewed"] != false || mine["state"] != nil || fmt.Sprint(mine["source"]) != "map[kind:api]" {
		t.Errorf("api experiment = %v", mine)
	}
	if pr["name"] != "policies/web/experiments/pr-7" || pr["state"] != "ACTIVE" || pr["previewed"] != true ||
		fmt.Sprint(pr["source"]) != "map[headCommit:h7 kind:pull_request number:7]" {
		t.Errorf("pull request experiment = %v", pr)
	}
}

// A rollback names who asked by the credential's name and role, never
// its secret; the generations show the author and the rollback.
func TestRollbackNamesWhoAskedAndGenerationsShowIt(t *testing.T) {
	rb := &rollbackFunc{fn: func(RollbackRequest) (RollbackResult, error) { return RollbackResult{Target: 5}, nil }}
	st := clusterState()
	g7 := st.Generations[7]
	g7.History = raftstore.History{Author: "<img src=x onerror=alert(1)> <m@x>", RollbackOf: 5, RequestedBy: "token (admin)"}
	st.Generations[7] = g7
	e := newTestEnv(t, Config{Cluster: &fakeCluster{state: st}, Rollback: rb, Token: "s3cret"})
	auth := map[string]string{"Authorization": "Bearer s3cret"}
	if a := e.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"waitSeconds":0}`), auth); a.code != 200 {
		t.Fatalf("rollback = %d %s", a.code, a.body)
	}
	if got := rb.calls[0].RequestedBy; got != "token (admin)" {
		t.Errorf("requested by %q, want the credential's name and role", got)
	}
	for _, path := range []string{"/v1/generations/7", "/v1/generations"} {
		a := e.do(http.MethodGet, path, nil, auth)
		if want := `"author":"\u003cimg src=x onerror=alert(1)\u003e \u003cm@x\u003e","rollbackOf":5,"requestedBy":"token (admin)"`; a.code != 200 || !strings.Contains(string(a.body), want) {
			t.Errorf("GET %s = %d %s, want %s", path, a.code, a.body, want)
		}
		if strings.Count(string(a.body), `"author"`) != 1 {
			t.Errorf("GET %s shows an author for a generation without one: %s", path, a.body)
		}
	}
}
