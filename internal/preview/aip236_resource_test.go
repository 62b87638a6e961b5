package preview_test

// AIP-236 conformance, "Experiments" and "Metadata": one test per must or
// must not, named after the rule it checks, in the order of the AIP.

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// The resource type must follow the convention RegularResourceType + Experiment.
func TestAIP236_ResourceTypeIsPolicyExperiment(t *testing.T) {
	if preview.ResourceType != "PolicyExperiment" {
		t.Fatalf("ResourceType = %q", preview.ResourceType)
	}
	op := preview.NewOperation("1", preview.MethodCreate, "policies/web/experiments/x", t0)
	done, err := op.Succeed(create(t, nil, "x", webPolicy()), at(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonMap(t, done)["response"].(map[string]any)["@type"]; got != preview.TypePrefix+"PolicyExperiment" {
		t.Fatalf("response @type = %v", got)
	}
}

// The experiment must contain the top-level resource fields name and etag.
func TestAIP236_ExperimentHasNameAndEtag(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	m := jsonMap(t, e)
	if m["name"] != "policies/web/experiments/x" {
		t.Errorf("name = %v", m["name"])
	}
	if m["etag"] != webPolicy().Etag() || m["etag"] == "" {
		t.Errorf("etag = %v, want the etag of its policy", m["etag"])
	}
}

// The experiment must contain the policy message being tested.
func TestAIP236_ExperimentContainsPolicy(t *testing.T) {
	e := create(t, nil, "x", tightWeb())
	if !reflect.DeepEqual(e.Policy.Rules, tightWeb().Rules) {
		t.Fatalf("policy rules = %+v", e.Policy.Rules)
	}
}

// The experiment must contain the field preview_metadata.
func TestAIP236_ExperimentHasPreviewMetadataField(t *testing.T) {
	e := start(t, create(t, nil, "x", webPolicy()), at(1))
	if _, ok := jsonMap(t, e)["previewMetadata"].(map[string]any); !ok {
		t.Fatalf("previewMetadata missing from %v", jsonMap(t, e))
	}
}

// The experiment must have a top-level field of the same type as the live policy.
func TestAIP236_PolicyFieldHasLivePolicyType(t *testing.T) {
	f, ok := reflect.TypeOf(preview.Experiment{}).FieldByName("Policy")
	if !ok || f.Type != reflect.TypeOf(&policy.Policy{}) {
		t.Fatalf("Experiment.Policy is %v, want *policy.Policy", f.Type)
	}
	// Rendered with the live policy's own JSON keys (its TOML names).
	got := jsonMap(t, create(t, nil, "x", webPolicy()))["policy"]
	if !reflect.DeepEqual(got, any(jsonMap(t, webPolicy()))) {
		t.Fatalf("policy JSON = %v, want the live policy's JSON form", got)
	}
}

// That field must be named after the live resource type: "policy".
func TestAIP236_PolicyFieldNamedAfterResourceType(t *testing.T) {
	m := jsonMap(t, create(t, nil, "x", webPolicy()))
	if _, ok := m["policy"].(map[string]any); !ok {
		t.Fatalf("no field \"policy\" in %v", m)
	}
}

// The name inside the embedded policy must be the name of the live policy.
func TestAIP236_EmbeddedPolicyNameIsLiveName(t *testing.T) {
	other := webPolicy()
	other.Name = "shop"
	_, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "x", Policy: other}, preview.Settings{}, t0)
	wantCode(t, err, preview.InvalidArgument)
	unnamed := webPolicy()
	unnamed.Name = ""
	e, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "x", Policy: unnamed}, preview.Settings{}, t0)
	if err != nil || e.Policy.Name != "web" {
		t.Fatalf("an unnamed policy takes the live name: %v, %+v", err, e)
	}
}

// To promote, the policy must be copied into the live policy and the experiment deleted.
func TestAIP236_PromotionCopiesPolicyAndDeletesExperiment(t *testing.T) {
	e := create(t, nil, "x", tightWeb())
	plan, err := preview.Commit(e, webPolicy().Etag(), preview.CommitRequest{Etag: e.Etag})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Live.Etag() != tightWeb().Etag() || plan.Live.Name != "web" {
		t.Errorf("plan.Live is not the experiment's policy: %+v", plan.Live)
	}
	if plan.Delete != e.Name {
		t.Errorf("plan.Delete = %q, want %q", plan.Delete, e.Name)
	}
}

// Each experiment's log entries must be preceded by log_prefix.
func TestAIP236_LogsPrecededByLogPrefix(t *testing.T) {
	h := newHarness(t, preview.Config{UnchangedEvery: 1}, webPolicy())
	a := start(t, create(t, nil, "a", tightWeb()), t0)
	b := start(t, create(t, []*preview.Experiment{a}, "b", webPolicy()), t0)
	h.set(a, b)
	h.offer("web", req("GET", "http", "/", "198.51.100.1"), req("GET", "https", "/", "198.51.100.1"))
	lines := h.log.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4 (two experiments, two requests, all logged)", len(lines))
	}
	for _, l := range lines {
		if msg, _ := l["msg"].(string); !strings.HasPrefix(msg, preview.LogPrefix) {
			t.Errorf("msg %q does not begin with %q", msg, preview.LogPrefix)
		}
	}
}

// The cap on experiments per policy must be documented (and is enforced).
func TestAIP236_CapIsDocumentedAndEnforced(t *testing.T) {
	doc, err := os.ReadFile("../../docs/preview.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "max_experiments_per_policy") || !strings.Contains(string(doc), "default 10") {
		t.Error("docs/preview.md does not document max_experiments_per_policy and its default of 10")
	}
	s := preview.Settings{MaxPerPolicy: 2}
	var exps []*preview.Experiment
	for _, id := range []string{"a", "b"} {
		e, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/web", ExperimentID: id, Policy: webPolicy()}, s, t0)
		if err != nil {
			t.Fatal(err)
		}
		exps = append(exps, e)
	}
	_, err = preview.Create(exps, preview.CreateRequest{Parent: "policies/web", ExperimentID: "c", Policy: webPolicy()}, s, t0)
	wantCode(t, err, preview.ResourceExhausted)
	pr, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/web", Policy: webPolicy(),
		Source: preview.Source{Kind: preview.SourcePullRequest, Number: 7}}, s, t0)
	if err != nil || pr.Previewed || pr.Reason == "" {
		t.Fatalf("a pull request over the cap is listed as not previewed: %v %+v", err, pr)
	}
	_, err = preview.StartPreview(pr, at(1))
	wantCode(t, err, preview.ResourceExhausted)
	// Once one is deleted, the waiting one gets its place.
	if up := preview.Rebalance([]*preview.Experiment{exps[0], pr}, "web", s); len(up) != 1 || !up[0].Previewed {
		t.Fatalf("Rebalance = %+v", up)
	}
}

// Cascading deletes must occur: deleting the live policy deletes all its experiments.
func TestAIP236_CascadingDelete(t *testing.T) {
	a := create(t, nil, "a", webPolicy())
	b := create(t, []*preview.Experiment{a}, "b", tightWeb())
	shop := webPolicy()
	shop.Name = "shop"
	c := create(t, nil, "a", shop)
	got := preview.CascadeDelete([]*preview.Experiment{a, b, c}, "web")
	if !reflect.DeepEqual(got, []string{a.Name, b.Name}) {
		t.Fatalf("CascadeDelete = %v", got)
	}
}

// Annotations must allow clients to store small amounts of arbitrary data.
func TestAIP236_AnnotationsStoreArbitraryData(t *testing.T) {
	ann := map[string]string{"owner": "team-edge", "ticket": "INC-42", "note": "ünïcode & spaces"}
	e, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "x", Policy: webPolicy(), Annotations: ann}, preview.Settings{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := preview.DecodeExperiment(mustPut(t, e))
	if err != nil || !reflect.DeepEqual(back.Annotations, ann) {
		t.Fatalf("annotations after a round trip = %v (%v)", back.Annotations, err)
	}
	huge := map[string]string{"blob": strings.Repeat("x", 300<<10)}
	_, err = preview.Update(e, preview.UpdateRequest{Annotations: huge}, at(1))
	wantCode(t, err, preview.InvalidArgument)
}

func mustPut(t *testing.T, e *preview.Experiment) []byte {
	t.Helper()
	p, err := e.PutPayload()
	if err != nil {
		t.Fatal(err)
	}
	return p.Data
}

// The metadata message must be named RegularResourceType + PreviewMetadata.
func TestAIP236_MetadataTypeIsPolicyPreviewMetadata(t *testing.T) {
	if preview.MetadataType != "PolicyPreviewMetadata" {
		t.Fatalf("MetadataType = %q", preview.MetadataType)
	}
}

// PolicyPreviewMetadata must have state, log_prefix, start_time and stop_time.
func TestAIP236_MetadataHasRequiredFields(t *testing.T) {
	e := start(t, create(t, nil, "x", webPolicy()), at(1))
	e, err := preview.StopPreview(e, at(2))
	if err != nil {
		t.Fatal(err)
	}
	md := jsonMap(t, e)["previewMetadata"].(map[string]any)
	for _, k := range []string{"state", "logPrefix", "startTime", "stopTime"} {
		if _, ok := md[k]; !ok {
			t.Errorf("previewMetadata has no %s: %v", k, md)
		}
	}
}

// When an experiment is first created, preview_metadata must be absent.
func TestAIP236_PreviewMetadataAbsentUntilFirstStart(t *testing.T) {
	e := create(t, nil, "x", webPolicy())
	if e.PreviewMetadata != nil {
		t.Fatalf("metadata on create: %+v", e.PreviewMetadata)
	}
	if _, ok := jsonMap(t, e)["previewMetadata"]; ok {
		t.Fatal("previewMetadata rendered before the first startPreview")
	}
	e, _ = preview.Update(e, preview.UpdateRequest{Policy: tightWeb()}, at(1))
	if e.PreviewMetadata != nil {
		t.Fatal("update created metadata")
	}
	_, err := preview.StopPreview(e, at(2))
	wantCode(t, err, preview.FailedPrecondition)
	if e = start(t, e, at(3)); e.PreviewMetadata == nil {
		t.Fatal("startPreview did not create metadata")
	}
}

// All preview_metadata fields must be output only.
func TestAIP236_PreviewMetadataIsOutputOnly(t *testing.T) {
	in, err := preview.ParseInput([]byte(`{"policy":{"name":"web","default_action":"allow","group":"default","on_error":"deny","rules":[]},
		"previewMetadata":{"state":"ACTIVE","logPrefix":"mine","startTime":"2020-01-01T00:00:00Z"}}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "x", Policy: in.Policy}, preview.Settings{}, t0)
	if err != nil || e.PreviewMetadata != nil {
		t.Fatalf("client-set previewMetadata was kept: %v %+v", err, e)
	}
	if _, err := preview.ParseInput([]byte(`{"policy":{"name":"web","rulez":[]}}`)); err == nil {
		t.Fatal("unknown fields are accepted")
	}
}

// The first startPreview must set state to ACTIVE.
func TestAIP236_FirstStartSetsActive(t *testing.T) {
	if e := start(t, create(t, nil, "x", webPolicy()), at(1)); e.PreviewMetadata.State != preview.Active {
		t.Fatalf("state = %q", e.PreviewMetadata.State)
	}
}

// The first startPreview must populate start_time with the current time.
func TestAIP236_FirstStartSetsStartTime(t *testing.T) {
	if e := start(t, create(t, nil, "x", webPolicy()), at(5)); !e.PreviewMetadata.StartTime.Equal(at(5)) {
		t.Fatalf("startTime = %v, want %v", e.PreviewMetadata.StartTime, at(5))
	}
}

// start_time must be updated every time state changes to ACTIVE.
func TestAIP236_StartTimeUpdatedOnEveryActivation(t *testing.T) {
	e := start(t, create(t, nil, "x", webPolicy()), at(1))
	e, _ = preview.StopPreview(e, at(2))
	e = start(t, e, at(3))
	if !e.PreviewMetadata.StartTime.Equal(at(3)) {
		t.Fatalf("after restart startTime = %v, want %v", e.PreviewMetadata.StartTime, at(3))
	}
	e, _ = preview.Update(e, preview.UpdateRequest{Policy: tightWeb()}, at(4))
	e = preview.AutoStart(e, preview.Settings{AutoStart: true}, at(5))
	if !e.PreviewMetadata.StartTime.Equal(at(5)) {
		t.Fatalf("after auto start startTime = %v, want %v", e.PreviewMetadata.StartTime, at(5))
	}
}

// startPreview must set the system-generated, predefined log_prefix.
func TestAIP236_LogPrefixIsPredefinedConstant(t *testing.T) {
	a := start(t, create(t, nil, "a", webPolicy()), at(1))
	b := start(t, create(t, nil, "b", tightWeb()), at(2))
	if a.PreviewMetadata.LogPrefix != "PolicyPreviewLog" || b.PreviewMetadata.LogPrefix != a.PreviewMetadata.LogPrefix {
		t.Fatalf("log prefixes %q, %q", a.PreviewMetadata.LogPrefix, b.PreviewMetadata.LogPrefix)
	}
}

// stopPreview must set state to SUSPENDED.
func TestAIP236_StopSetsSuspended(t *testing.T) {
	e, err := preview.StopPreview(start(t, create(t, nil, "x", webPolicy()), at(1)), at(2))
	if err != nil || e.PreviewMetadata.State != preview.Suspended {
		t.Fatalf("after stop: %v %+v", err, e.PreviewMetadata)
	}
}

// stopPreview must populate stop_time with the current time.
func TestAIP236_StopSetsStopTime(t *testing.T) {
	e, _ := preview.StopPreview(start(t, create(t, nil, "x", webPolicy()), at(1)), at(7))
	if !e.PreviewMetadata.StopTime.Equal(at(7)) {
		t.Fatalf("stopTime = %v", e.PreviewMetadata.StopTime)
	}
}
