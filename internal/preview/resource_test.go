package preview_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

func TestExperimentIDs(t *testing.T) {
	idRE := regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	long := "feature/a-very-long-branch-name-that-goes-on-and-on-and-on-and-on-forever"
	for _, tc := range []struct {
		src  preview.Source
		user string
		want string
	}{
		{preview.Source{Kind: preview.SourcePullRequest, Number: 42}, "", "pr-42"},
		{preview.Source{Kind: preview.SourceBranch, Branch: "tighten-geo"}, "", "branch-tighten-geo"},
		{preview.Source{Kind: preview.SourceBranch, Branch: "feature/Geo_Block"}, "", "branch-feature-geo-block-"},
		{preview.Source{Kind: preview.SourceBranch, Branch: long}, "", "branch-feature-a-very-long"},
		{preview.Source{Kind: preview.SourceAPI}, "my-exp-1", "my-exp-1"},
	} {
		got, err := preview.ExperimentID(tc.src, tc.user)
		if err != nil || !idRE.MatchString(got) || len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("ExperimentID(%+v, %q) = %q, %v; want prefix %q", tc.src, tc.user, got, err, tc.want)
		}
	}
	a, _ := preview.ExperimentID(preview.Source{Kind: preview.SourceBranch, Branch: "feature/x"}, "")
	b, _ := preview.ExperimentID(preview.Source{Kind: preview.SourceBranch, Branch: "feature-x"}, "")
	if a == b {
		t.Errorf("feature/x and feature-x share id %q", a)
	}
	for _, bad := range []struct {
		src  preview.Source
		user string
	}{
		{preview.Source{Kind: preview.SourcePullRequest}, ""},
		{preview.Source{Kind: preview.SourceBranch, Branch: "///"}, ""},
		{preview.Source{Kind: preview.SourceAPI}, "Upper"},
		{preview.Source{Kind: preview.SourceAPI}, "1abc"},
		{preview.Source{Kind: "gitlab"}, "x"},
	} {
		_, err := preview.ExperimentID(bad.src, bad.user)
		wantCode(t, err, preview.InvalidArgument)
	}
}

func TestListPagination(t *testing.T) {
	var exps []*preview.Experiment
	for i := range 7 {
		exps = append(exps, create(t, exps, fmt.Sprintf("e%d", i), webPolicy()))
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		resp, err := preview.List(exps, preview.ListRequest{Parent: "policies/web", PageSize: 3, PageToken: token})
		if err != nil || pages > 3 {
			t.Fatalf("page %d: %v", pages, err)
		}
		got = append(got, names(resp.Experiments)...)
		if token = resp.NextPageToken; token == "" {
			break
		}
		_, err = preview.List(exps, preview.ListRequest{Parent: "policies/web", PageSize: 3, PageToken: token, Filter: "preview_metadata.state = ACTIVE"})
		wantCode(t, err, preview.InvalidArgument)
	}
	if fmt.Sprint(got) != fmt.Sprint(names(exps)) {
		t.Fatalf("pages gave %v", got)
	}
	for _, bad := range []preview.ListRequest{
		{Parent: "policies/web", PageToken: "!!"},
		{Parent: "policies/web", PageSize: -1},
		{Parent: "web"},
		{Parent: "policies/web", Filter: "state = ACTIVE"},
	} {
		_, err := preview.List(exps, bad)
		wantCode(t, err, preview.InvalidArgument)
	}
	resp, _ := preview.List(exps, preview.ListRequest{Parent: "policies/shop"})
	if b, _ := json.Marshal(resp); string(b) != `{"experiments":[]}` {
		t.Fatalf("empty list renders %s", b)
	}
}

func TestParseFilter(t *testing.T) {
	for in, want := range map[string]preview.State{
		"": "", "  ": "", "preview_metadata.state = ACTIVE": preview.Active,
		"preview_metadata.state=SUSPENDED": preview.Suspended, "\tpreview_metadata.state =\tACTIVE\n": preview.Active,
	} {
		f, err := preview.ParseFilter(in)
		if err != nil || f.State != want {
			t.Errorf("ParseFilter(%q) = %+v, %v", in, f, err)
		}
	}
	for _, in := range []string{"preview_metadata.state = active", "preview_metadata.state == ACTIVE",
		"preview_metadata.state = ACTIVE AND x = 1", "previewMetadata.state = ACTIVE", "preview_metadata.state",
		"preview_metadata.state = \"ACTIVE\"", "name = x", "preview_metadata.state = STATE_UNDEFINED"} {
		_, err := preview.ParseFilter(in)
		wantCode(t, err, preview.InvalidArgument)
	}
}

func TestOperationFailure(t *testing.T) {
	op := preview.NewOperation("abc", preview.MethodCommit, "policies/web/experiments/x", t0)
	_, err := preview.Commit(nil, "", preview.CommitRequest{Etag: "e"})
	failed := op.Fail(err, at(1))
	if !failed.Done || failed.Error.Code != int(preview.NotFound) || failed.Response != nil || failed.Error.Message == "" {
		t.Fatalf("failed operation %+v", failed)
	}
	internal := op.Fail(errors.New("disk on fire at /var/secret"), at(1))
	if internal.Error.Code != 13 || internal.Error.Message != "internal error" {
		t.Fatalf("internal error leaked: %+v", internal.Error)
	}
	// A coded sentinel (gitsource's "nothing to commit") is the caller's
	// problem, not an internal one: the operation says what it was.
	nothing := fmt.Errorf("commit: %w", errs.Sentinel(errs.FailedPrecondition, "gitsource: nothing to commit"))
	if e := op.Fail(nothing, at(1)).Error; e.Code != int(errs.FailedPrecondition) || e.Message != nothing.Error() {
		t.Fatalf("coded error shown as %+v", e)
	}
	if id := preview.OperationID(preview.MethodCommit, "x", t0); id != preview.OperationID(preview.MethodCommit, "x", t0) || len(id) != 24 {
		t.Fatalf("OperationID not deterministic: %q", id)
	}
}

func TestErrorsMapToAIP193(t *testing.T) {
	for code, want := range map[preview.Code][2]any{
		preview.InvalidArgument: {"INVALID_ARGUMENT", 400}, preview.NotFound: {"NOT_FOUND", 404},
		preview.AlreadyExists: {"ALREADY_EXISTS", 409}, preview.Aborted: {"ABORTED", 409},
		preview.FailedPrecondition: {"FAILED_PRECONDITION", 400}, preview.ResourceExhausted: {"RESOURCE_EXHAUSTED", 429},
	} {
		if code.String() != want[0] || code.HTTPStatus() != want[1] {
			t.Errorf("%d: %s %d", code, code, code.HTTPStatus())
		}
	}
	_, err := preview.Get(nil, "policies/web/experiments/x")
	if !errors.Is(err, preview.ErrNotFound) || errors.Is(err, preview.ErrAborted) {
		t.Fatalf("errors.Is on %v", err)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	e := start(t, create(t, nil, "x", tightWeb()), at(1))
	put, err := e.PutPayload()
	if err != nil {
		t.Fatal(err)
	}
	st := raftstore.NewState()
	st.Experiments[put.Name] = raftstore.Experiment(put)
	st.Experiments["policies/web/experiments/bad"] = raftstore.Experiment{Name: "bad", Data: []byte("{")}
	exps, errs := preview.FromState(st)
	if len(exps) != 1 || len(errs) != 1 {
		t.Fatalf("FromState: %d experiments, errors %v", len(exps), errs)
	}
	if exps[0].Etag != e.Etag || exps[0].Policy.Etag() != e.Etag || !exps[0].IsActive() {
		t.Fatalf("round trip changed the experiment: %+v", exps[0])
	}
	op, _ := preview.NewOperation("id1", preview.MethodCreate, e.Name, t0).Succeed(e, at(1))
	opPut, _ := op.PutPayload()
	back, err := preview.DecodeOperation(opPut.Data)
	if err != nil || opPut.ID != "id1" || back.Name != "operations/id1" || !back.Done {
		t.Fatalf("operation round trip: %+v %v", back, err)
	}
	if p := preview.DeletePayload(e.Name); p.Name != e.Name {
		t.Fatal(p)
	}
}

func TestCheckPolicy(t *testing.T) {
	bad := webPolicy()
	bad.Rules[0].Match = "request.pth == '/'"
	err := preview.CheckPolicy(bad, engine.Options{})
	wantCode(t, err, preview.InvalidArgument)
	if err := preview.CheckPolicy(webPolicy(), engine.Options{}); err != nil {
		t.Fatal(err)
	}
}

// A stored experiment decodes to the same etag, tests and their request
// tables (TOML integers, times) included, so commits check the right etag.
func TestStoredEtagSurvivesRoundTrip(t *testing.T) {
	for _, name := range []string{"edge-firewall", "admin-api"} {
		p := loadExample(t, name)
		e := create(t, nil, "x", p)
		back, err := preview.DecodeExperiment(mustPut(t, e))
		if err != nil || back.Policy.Etag() != e.Etag || len(back.Policy.Tests) != len(p.Tests) {
			t.Fatalf("%s: etag %s after decoding, want %s (%v)", name, back.Policy.Etag(), e.Etag, err)
		}
	}
}

func TestViewCarriesStats(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	v := preview.ViewOf(e, []preview.Stats{{Experiment: e.Name, ExperimentEtag: e.Etag, Tally: preview.Tally{Counts: preview.Counts{Evaluated: 3}}}})
	m := jsonMap(t, v)
	if m["name"] != e.Name || m["stats"].(map[string]any)["evaluated"] != 3.0 {
		t.Fatalf("view JSON %v", m)
	}
	if _, ok := jsonMap(t, preview.ViewOf(e, nil))["stats"]; ok {
		t.Fatal("stats rendered without any")
	}
}

func TestViewWithThresholds(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	limit := 0.1
	set := preview.ThresholdSet{"*": {MaxDenyToAllowRatio: &limit}, "other": {}}
	if set.For("other").IsZero() != true || set.For("web").MaxDenyToAllowRatio == nil {
		t.Fatalf("For: %+v %+v", set.For("other"), set.For("web"))
	}
	st := []preview.Stats{{Experiment: e.Name, ExperimentEtag: e.Etag,
		Tally: preview.Tally{Counts: preview.Counts{Evaluated: 10, DenyToAllow: 2}}}}
	m := jsonMap(t, preview.ViewWith(e, st, set.For(e.PolicyName())))
	sum, _ := m["summary"].(map[string]any)
	if sum == nil || sum["failing"] != true || !strings.Contains(sum["reason"].(string), "max_deny_to_allow_ratio 0.1") {
		t.Fatalf("view JSON %v", m)
	}
	if _, ok := jsonMap(t, preview.ViewWith(e, st, set.For("other")))["summary"]; ok {
		t.Fatal("summary rendered without thresholds")
	}
}
