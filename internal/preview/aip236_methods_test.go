package preview_test

// AIP-236 conformance, "Methods", "Changes to live policy API methods" and
// "Logging": one test per must or must not, in the order of the AIP.

import (
	"reflect"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// lro checks a method's operation: metadata type per AIP-151 and the response type.
func lro(t *testing.T, m preview.Method, metadata, response string, resp *preview.Experiment) {
	t.Helper()
	op := preview.NewOperation("op1", m, "policies/web/experiments/x", t0)
	if op.Name != "operations/op1" || op.Done {
		t.Fatalf("new operation = %+v", op)
	}
	done, err := op.Succeed(resp, at(1))
	if err != nil {
		t.Fatal(err)
	}
	j := jsonMap(t, done)
	if got := j["metadata"].(map[string]any)["@type"]; got != preview.TypePrefix+metadata {
		t.Errorf("metadata @type = %v, want %s", got, preview.TypePrefix+metadata)
	}
	if got := j["response"].(map[string]any)["@type"]; got != response {
		t.Errorf("response @type = %v, want %s", got, response)
	}
	if j["done"] != true {
		t.Error("operation not done")
	}
}

// create must be a long-running operation whose response type is PolicyExperiment.
func TestAIP236_CreateIsLongRunningWithPolicyExperimentResponse(t *testing.T) {
	lro(t, preview.MethodCreate, "CreatePolicyExperimentMetadata", preview.TypePrefix+"PolicyExperiment", create(t, nil, "x", webPolicy()))
}

// create must support previewing a new policy (no live policy yet).
func TestAIP236_CreateSupportsNewPolicy(t *testing.T) {
	fresh := webPolicy()
	fresh.Name = "brand-new"
	h := newHarness(t, preview.Config{}) // no live policies at all
	e := start(t, create(t, nil, "x", fresh), t0)
	h.set(e)
	h.offer("brand-new", req("GET", "https", "/admin/x", "198.51.100.1"), req("GET", "https", "/", "198.51.100.1"))
	st := h.stats(e)
	if st.Evaluated != 2 || st.AllowToDeny != 1 || st.Unchanged != 1 {
		t.Fatalf("new policy against the no-op live: %+v", st.Counts)
	}
	if s := preview.Summarize(e, "", []preview.Stats{st}, preview.Thresholds{}); s.Kind != preview.KindNewPolicy {
		t.Fatalf("kind = %q", s.Kind)
	}
}

// create must support previewing an update to a live policy.
func TestAIP236_CreateSupportsUpdate(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	if st := h.stats(e); st.AllowToDeny != 1 {
		t.Fatalf("update preview: %+v", st.Counts)
	}
	if s := preview.Summarize(e, webPolicy().Etag(), nil, preview.Thresholds{}); s.Kind != preview.KindUpdate {
		t.Fatalf("kind = %q", s.Kind)
	}
}

// create must support previewing a deletion of the live policy.
func TestAIP236_CreateSupportsDeletion(t *testing.T) {
	e := create(t, nil, "x", preview.NoOp(webPolicy(), "web"))
	if s := preview.Summarize(e, webPolicy().Etag(), nil, preview.Thresholds{}); s.Kind != preview.KindDeletion {
		t.Fatalf("kind = %q", s.Kind)
	}
}

// For update and delete, the policy field must carry the full live payload, name included.
func TestAIP236_PolicyCarriesFullPayloadAndName(t *testing.T) {
	live := webPolicy()
	live.Description, live.Group = "the web", "edge"
	noop := preview.NoOp(live, live.Name)
	if noop.Name != "web" || noop.Description != "the web" || noop.Group != "edge" || noop.OnError != live.OnError {
		t.Fatalf("no-op lost the live payload: %+v", noop)
	}
	if len(live.Rules) != 2 {
		t.Fatal("NoOp modified the live policy")
	}
}

// To preview an update, the experiment's rules (the new intended state) are what is evaluated.
func TestAIP236_UpdatePreviewUsesExperimentRules(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	tr := h.stats(e).Transitions
	if len(tr) != 1 || tr[0].ExperimentRule != "deny-http" || tr[0].LiveRule != "" {
		t.Fatalf("transitions = %+v", tr)
	}
}

// To preview a delete, rules representing a no-op must be set: no rules, allow.
func TestAIP236_NoOpRulesPreviewDeletion(t *testing.T) {
	noop := preview.NoOp(webPolicy(), "web")
	if !preview.IsNoOp(noop) || len(noop.Rules) != 0 || noop.DefaultAction != policy.ActionAllow {
		t.Fatalf("NoOp = %+v", noop)
	}
	if preview.IsNoOp(webPolicy()) {
		t.Fatal("a policy with rules is not a no-op")
	}
}

// A new policy needs no live no-op to be created first: the system compares with one.
func TestAIP236_NewPolicyWithoutLiveComparesAgainstNoOp(t *testing.T) {
	h := newHarness(t, preview.Config{UnchangedEvery: 1})
	fresh := webPolicy()
	fresh.Name = "fresh"
	e := start(t, create(t, nil, "x", fresh), t0)
	h.set(e)
	h.offer("fresh", req("GET", "https", "/", "198.51.100.1"))
	l := h.log.lines(t)
	if len(l) != 1 || l[0]["live_etag"] != preview.NoOp(nil, "fresh").Etag() || l[0]["live_decision"] != "ALLOW" {
		t.Fatalf("log = %v", l)
	}
}

// Calling create more than once must create more than one experiment.
func TestAIP236_CreateTwiceCreatesTwoExperiments(t *testing.T) {
	a := create(t, nil, "a", webPolicy())
	b := create(t, []*preview.Experiment{a}, "b", webPolicy())
	if a.Name == b.Name {
		t.Fatal("same name twice")
	}
	_, err := preview.Create([]*preview.Experiment{a, b}, preview.CreateRequest{Parent: "policies/web", ExperimentID: "a", Policy: webPolicy()}, preview.Settings{}, t0)
	wantCode(t, err, preview.AlreadyExists)
}

// update must be long-running with response type PolicyExperiment.
func TestAIP236_UpdateIsLongRunningWithPolicyExperimentResponse(t *testing.T) {
	lro(t, preview.MethodUpdate, "UpdatePolicyExperimentMetadata", preview.TypePrefix+"PolicyExperiment", create(t, nil, "x", webPolicy()))
}

// The name inside policy must not change on update.
func TestAIP236_UpdateCannotChangePolicyName(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	renamed := tightWeb()
	renamed.Name = "other"
	_, err := preview.Update(e, preview.UpdateRequest{Policy: renamed}, at(1))
	wantCode(t, err, preview.InvalidArgument)
	u, err := preview.Update(e, preview.UpdateRequest{Policy: tightWeb(), HeadCommit: "abc"}, at(1))
	if err != nil || u.Etag != tightWeb().Etag() || u.Source.HeadCommit != "abc" || e.Etag != webPolicy().Etag() {
		t.Fatalf("update: %v, new etag %q, old experiment etag %q", err, u.Etag, e.Etag)
	}
}

// An update must set state to SUSPENDED if it was ACTIVE.
func TestAIP236_UpdateSuspendsActive(t *testing.T) {
	e := start(t, create(t, nil, "x", webPolicy()), at(1))
	u, err := preview.Update(e, preview.UpdateRequest{Policy: tightWeb()}, at(2))
	if err != nil || u.PreviewMetadata.State != preview.Suspended || !u.PreviewMetadata.StopTime.Equal(at(2)) {
		t.Fatalf("after update: %v %+v", err, u.PreviewMetadata)
	}
	if e.PreviewMetadata.State != preview.Active {
		t.Fatal("Update modified its input")
	}
}

// Get must be provided.
func TestAIP236_GetIsProvided(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	if got, err := preview.Get([]*preview.Experiment{e}, e.Name); err != nil || got != e {
		t.Fatalf("Get = %v, %v", got, err)
	}
	_, err := preview.Get([]*preview.Experiment{e}, "policies/web/experiments/nope")
	wantCode(t, err, preview.NotFound)
}

// List must be provided, and filtering on preview_metadata.state shows what is previewed.
func TestAIP236_ListFiltersByPreviewState(t *testing.T) {
	a := start(t, create(t, nil, "a", webPolicy()), at(1))
	b := create(t, nil, "b", webPolicy())
	c, _ := preview.StopPreview(start(t, create(t, nil, "c", webPolicy()), at(1)), at(2))
	all := []*preview.Experiment{c, b, a}
	for filter, want := range map[string][]*preview.Experiment{
		"":                                    {a, b, c},
		"preview_metadata.state = ACTIVE":     {a},
		"preview_metadata.state=SUSPENDED":    {c},
		"  preview_metadata.state =  ACTIVE ": {a},
	} {
		resp, err := preview.List(all, preview.ListRequest{Parent: "policies/web", Filter: filter})
		if err != nil || !reflect.DeepEqual(resp.Experiments, want) {
			t.Errorf("filter %q: %v, %v", filter, names(resp.Experiments), err)
		}
	}
}

func names(exps []*preview.Experiment) []string {
	var out []string
	for _, e := range exps {
		out = append(out, e.Name)
	}
	return out
}

// delete must be long-running with response type PolicyExperiment.
func TestAIP236_DeleteIsLongRunningWithPolicyExperimentResponse(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	deleted, err := preview.Delete(e, "")
	if err != nil {
		t.Fatal(err)
	}
	lro(t, preview.MethodDelete, "DeletePolicyExperimentMetadata", preview.TypePrefix+"PolicyExperiment", deleted)
	_, err = preview.Delete(nil, "")
	wantCode(t, err, preview.NotFound)
	_, err = preview.Delete(e, "stale")
	wantCode(t, err, preview.Aborted)
}

// startPreview's operation metadata type must follow AIP-151.
func TestAIP236_StartPreviewOperationMetadataType(t *testing.T) {
	lro(t, preview.MethodStartPreview, "StartPreviewPolicyExperimentMetadata", preview.TypePrefix+"PolicyExperiment", create(t, nil, "x", webPolicy()))
}

// startPreview must trigger the system to start generating logs.
func TestAIP236_StartPreviewStartsLogging(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	e := create(t, nil, "x", tightWeb())
	h.set(e)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	if n := len(h.log.lines(t)); n != 0 {
		t.Fatalf("%d log lines before startPreview", n)
	}
	h.set(start(t, e, at(1)))
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	if n := len(h.log.lines(t)); n != 1 {
		t.Fatalf("%d log lines after startPreview, want 1", n)
	}
}

// Every successful startPreview must set log_prefix, start_time and state.
func TestAIP236_EveryStartSetsPrefixTimeAndState(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	for i := 1; i <= 3; i++ {
		e = start(t, e, at(i))
		md := e.PreviewMetadata
		if md.LogPrefix != preview.LogPrefix || !md.StartTime.Equal(at(i)) || md.State != preview.Active {
			t.Fatalf("start %d: %+v", i, md)
		}
	}
}

// startPreview on an experiment with no-op rules must preview the deletion of the live policy.
func TestAIP236_StartOnNoOpPreviewsDeletion(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	e := start(t, create(t, nil, "x", preview.NoOp(webPolicy(), "web")), t0)
	h.set(e)
	h.offer("web", req("GET", "https", "/admin/users", "198.51.100.1"), req("GET", "https", "/", "198.51.100.1"))
	st := h.stats(e)
	if st.DenyToAllow != 1 || st.Unchanged != 1 {
		t.Fatalf("deletion preview: %+v", st.Counts)
	}
}

// stopPreview's operation metadata type must follow AIP-151.
func TestAIP236_StopPreviewOperationMetadataType(t *testing.T) {
	lro(t, preview.MethodStopPreview, "StopPreviewPolicyExperimentMetadata", preview.TypePrefix+"PolicyExperiment", create(t, nil, "x", webPolicy()))
}

// stopPreview must trigger the system to stop generating logs.
func TestAIP236_StopPreviewStopsLogging(t *testing.T) {
	h := newHarness(t, preview.Config{}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	stopped, _ := preview.StopPreview(e, at(1))
	h.set(stopped)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	if n := len(h.log.lines(t)); n != 1 {
		t.Fatalf("%d log lines, want only the one before stopPreview", n)
	}
	if st := h.stats(e); st.Evaluated != 1 {
		t.Fatalf("evaluated %d after stop, want 1 (stats kept, no new evaluations)", st.Evaluated)
	}
}

// commit's operation metadata type must follow AIP-151 (response: Empty).
func TestAIP236_CommitOperationMetadataType(t *testing.T) {
	lro(t, preview.MethodCommit, "CommitPolicyExperimentMetadata", "type.googleapis.com/google.protobuf.Empty", nil)
}

// commit must copy policy into the live policy and delete the experiment, in one plan.
func TestAIP236_CommitIsAtomicCopyAndDelete(t *testing.T) {
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	e.Source.HeadCommit = "0123abc"
	plan, err := preview.Commit(e, webPolicy().Etag(), preview.CommitRequest{Etag: `"` + e.Etag + `"`, ParentEtag: webPolicy().Etag()})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Live != e.Policy || plan.Delete != e.Name || plan.HeadCommit != "0123abc" {
		t.Fatalf("plan = %+v", plan)
	}
}

// If commit fails, previewing must not stop and the live policy must not be updated.
func TestAIP236_FailedCommitKeepsPreviewAndLive(t *testing.T) {
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	before := jsonMap(t, e)
	plan, err := preview.Commit(e, webPolicy().Etag(), preview.CommitRequest{Etag: "stale"})
	wantCode(t, err, preview.Aborted)
	if plan.Live != nil || plan.Delete != "" {
		t.Fatalf("a failed commit planned changes: %+v", plan)
	}
	if !reflect.DeepEqual(jsonMap(t, e), before) || !e.IsActive() {
		t.Fatal("a failed commit changed the experiment")
	}
}

// The etag must match that of the experiment for commit to succeed.
func TestAIP236_CommitWithStaleEtagAborts(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	u, _ := preview.Update(e, preview.UpdateRequest{Policy: tightWeb()}, at(1))
	_, err := preview.Commit(u, "", preview.CommitRequest{Etag: e.Etag})
	wantCode(t, err, preview.Aborted)
}

// Without an etag, commit must not succeed.
func TestAIP236_CommitWithoutEtagFails(t *testing.T) {
	_, err := preview.Commit(create(t, nil, "x", webPolicy()), webPolicy().Etag(), preview.CommitRequest{})
	wantCode(t, err, preview.InvalidArgument)
}

// A parent_etag may be given to pin the live version overwritten (ABORTED when stale).
func TestAIP236_CommitParentEtagMustMatchLive(t *testing.T) {
	e := create(t, nil, "x", tightWeb())
	_, err := preview.Commit(e, webPolicy().Etag(), preview.CommitRequest{Etag: e.Etag, ParentEtag: "old-live"})
	wantCode(t, err, preview.Aborted)
	_, err = preview.Commit(e, "", preview.CommitRequest{Etag: e.Etag, ParentEtag: "any"})
	wantCode(t, err, preview.Aborted)
}

// Calling commit twice must return NOT_FOUND: the first deleted the experiment.
func TestAIP236_SecondCommitIsNotFound(t *testing.T) {
	store := map[string]*preview.Experiment{}
	e := create(t, nil, "x", tightWeb())
	store[e.Name] = e
	commit := func() error {
		plan, err := preview.Commit(store[e.Name], webPolicy().Etag(), preview.CommitRequest{Etag: e.Etag})
		if err == nil {
			delete(store, plan.Delete)
		}
		return err
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, commit(), preview.NotFound)
}

// commit can be called on an experiment in any state.
func TestAIP236_CommitInAnyState(t *testing.T) {
	fresh := create(t, nil, "x", tightWeb())
	active := start(t, fresh, at(1))
	suspended, _ := preview.StopPreview(active, at(2))
	for _, e := range []*preview.Experiment{fresh, active, suspended} {
		if _, err := preview.Commit(e, "", preview.CommitRequest{Etag: e.Etag}); err != nil {
			t.Errorf("commit in state %+v: %v", e.PreviewMetadata, err)
		}
	}
}

// Deleting the live policy must delete all of its experiments.
func TestAIP236_LiveDeleteDeletesAllExperiments(t *testing.T) {
	var exps []*preview.Experiment
	for _, id := range []string{"a", "b", "c"} {
		exps = append(exps, create(t, exps, id, webPolicy()))
	}
	if got := preview.CascadeDelete(exps, "web"); len(got) != 3 {
		t.Fatalf("CascadeDelete = %v", got)
	}
	if got := preview.CascadeDelete(exps, "shop"); len(got) != 0 {
		t.Fatalf("other policy: %v", got)
	}
}

// To keep experiments while negating the live policy, it is changed to a no-op, not deleted.
func TestAIP236_NoOpLiveKeepsExperiments(t *testing.T) {
	noop := preview.NoOp(webPolicy(), "web")
	h := newHarness(t, preview.Config{}, noop)
	e := start(t, create(t, nil, "x", webPolicy()), t0)
	h.set(e)
	h.offer("web", req("GET", "https", "/admin", "198.51.100.1"))
	if st := h.stats(e); st.AllowToDeny != 1 {
		t.Fatalf("experiment under a no-op live: %+v", st.Counts)
	}
}

// Logs must contain the experiment's results, both etags, and begin with log_prefix.
func TestAIP236_LogCarriesResultsAndBothEtags(t *testing.T) {
	h := newHarness(t, preview.Config{Node: "node-1"}, webPolicy())
	h.sh.SetLive(7, map[string]*engine.CompiledPolicy{"web": h.live["web"]})
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"))
	l := h.log.lines(t)
	if len(l) != 1 {
		t.Fatalf("%d lines", len(l))
	}
	want := map[string]any{
		"experiment": e.Name, "experiment_etag": e.Etag, "live_etag": webPolicy().Etag(), "generation": 7.0,
		"live_decision": "ALLOW", "experiment_decision": "DENY", "live_rule": "", "experiment_rule": "deny-http",
		"changed": true, "node": "node-1",
	}
	for k, v := range want {
		if l[0][k] != v {
			t.Errorf("%s = %v, want %v", k, l[0][k], v)
		}
	}
	if _, ok := l[0]["request"].(map[string]any); !ok {
		t.Error("no request in the log line")
	}
}
