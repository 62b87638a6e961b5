package preview_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

func nodeStats(node string, evaluated, a2d uint64, start, end time.Time, liveEtag string) preview.NodeStats {
	return preview.NodeStats{Node: node, Stats: []preview.Stats{{
		Experiment: "policies/web/experiments/x", ExperimentEtag: "e1", LiveEtag: liveEtag,
		Tally: preview.Tally{Counts: preview.Counts{Evaluated: evaluated, Unchanged: evaluated - a2d, AllowToDeny: a2d, Dropped: 1},
			Transitions: []preview.Transition{{LiveRule: "", ExperimentRule: "deny-http", LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: a2d}}},
		Replayed: preview.Tally{Counts: preview.Counts{Evaluated: 5, Unchanged: 5}},
		Samples:  []preview.Sample{{LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, ExperimentRule: "deny-http"}},
		Window:   &preview.Window{Start: start, End: end},
	}}}
}

func TestMergeAcrossNodes(t *testing.T) {
	got := preview.Merge(
		nodeStats("node-2", 100, 10, at(5), at(20), "live-new"),
		nodeStats("node-1", 50, 5, at(0), at(10), "live-old"),
	)
	if len(got) != 1 {
		t.Fatalf("%d merged stats", len(got))
	}
	m := got[0]
	want := preview.Counts{Evaluated: 150, Unchanged: 135, AllowToDeny: 15, Dropped: 2}
	if m.Counts != want || m.Replayed.Evaluated != 10 {
		t.Errorf("counts %+v replayed %+v", m.Counts, m.Replayed.Counts)
	}
	if len(m.Transitions) != 1 || m.Transitions[0].Count != 15 {
		t.Errorf("transitions %+v", m.Transitions)
	}
	if !m.Window.Start.Equal(at(0)) || !m.Window.End.Equal(at(20)) {
		t.Errorf("window %+v", m.Window)
	}
	if len(m.Nodes) != 2 || m.Nodes[0].Node != "node-1" || m.Nodes[1].Evaluated != 100 || m.Nodes[0].Dropped != 1 {
		t.Errorf("nodes %+v", m.Nodes)
	}
	if m.LiveEtag != "live-new" || len(m.Samples) != 2 {
		t.Errorf("live etag %q, %d samples", m.LiveEtag, len(m.Samples))
	}
	j := jsonMap(t, m)
	for _, k := range []string{"evaluated", "unchanged", "allowToDeny", "denyToAllow", "ruleChanged", "errors", "dropped", "replayed", "transitions", "samples", "window", "nodes"} {
		if _, ok := j[k]; !ok {
			t.Errorf("stats JSON has no %q (CONTRACT §4)", k)
		}
	}
	tr := j["transitions"].([]any)[0].(map[string]any)
	for _, k := range []string{"liveRule", "experimentRule", "liveDecision", "experimentDecision", "count"} {
		if _, ok := tr[k]; !ok {
			t.Errorf("transition JSON has no %q", k)
		}
	}
}

func ratio(f float64) *float64 { return &f }

func TestThresholds(t *testing.T) {
	st := preview.Stats{Tally: preview.Tally{Counts: preview.Counts{Evaluated: 200, AllowToDeny: 4, DenyToAllow: 1}}}
	for _, tc := range []struct {
		th   preview.Thresholds
		fail bool
	}{
		{preview.Thresholds{}, false},
		{preview.Thresholds{MaxAllowToDenyRatio: ratio(0.02)}, false},
		{preview.Thresholds{MaxAllowToDenyRatio: ratio(0.01)}, true},
		{preview.Thresholds{MaxDenyToAllowRatio: ratio(0)}, true},
	} {
		fail, reason := tc.th.Check(st)
		if fail != tc.fail || fail && (reason == "" || strings.Contains(reason, "\n")) {
			t.Errorf("%+v: %v %q", tc.th, fail, reason)
		}
	}
	_, reason := preview.Thresholds{MaxAllowToDenyRatio: ratio(0.01)}.Check(st)
	if reason != "ALLOW→DENY for 2.00% of live traffic (4 of 200), over max_allow_to_deny_ratio 0.01" {
		t.Errorf("reason %q", reason)
	}
	replayedOnly := preview.Stats{Replayed: preview.Tally{Counts: preview.Counts{Evaluated: 10, AllowToDeny: 5}}}
	if fail, reason := (preview.Thresholds{MaxAllowToDenyRatio: ratio(0.1)}).Check(replayedOnly); !fail || !strings.Contains(reason, "replayed") {
		t.Errorf("replayed-only: %v %q", fail, reason)
	}
}

func TestRenderMarkdownForPullRequest(t *testing.T) {
	e := start(t, create(t, nil, "pr-7", tightWeb()), t0)
	merged := preview.Merge(nodeStats("node-1", 50, 5, at(0), at(10), webPolicy().Etag()))
	merged[0].Experiment, merged[0].ExperimentEtag = e.Name, e.Etag
	merged[0].Samples[0].Request = map[string]any{"path": "/```\n@here <script>"}
	merged[0].Transitions[0].ExperimentRule = "deny|`weird`"
	s := preview.Summarize(e, webPolicy().Etag(), merged, preview.Thresholds{MaxAllowToDenyRatio: ratio(0.05)})
	var b bytes.Buffer
	if err := preview.RenderMarkdown(&b, preview.Report{Summaries: []preview.Summary{s}, Commands: true}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{preview.Marker, "policies/web", e.Etag, webPolicy().Etag(), "ACTIVE", "| Live | 50 | 45 | 5 |",
		"Top rule transitions", "node-1", "/reconciler preview start", "/reconciler preview stop", "/reconciler commit",
		"**failing**", "max\\_allow\\_to\\_deny\\_ratio", "2025-06-01 12:10:00Z", "deny\\|"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "<script>") {
		t.Errorf("request content escaped into markup:\n%s", md)
	}
	if !strings.HasPrefix(md, preview.Marker+"\n") {
		t.Error("the marker must be the first line")
	}
}

// loadExample reads a policy of policies.example.
func loadExample(t testing.TB, name string) *policy.Policy {
	t.Helper()
	p, err := policy.LoadPolicy(os.DirFS("../../policies.example"), name, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tightenedEdge adds a rule denying plain http after the probe filters.
func tightenedEdge(t testing.TB) *policy.Policy {
	p := loadExample(t, "edge-firewall")
	c := *p
	c.Rules = append(append([]policy.Rule(nil), p.Rules...), policy.Rule{
		Name: "deny-plaintext-everywhere", Priority: 1450, Action: policy.ActionDeny, Match: "request.scheme == 'http'"})
	return &c
}

// Replaying the sample traffic with a tightened edge-firewall gives, as
// ALLOW→DENY, exactly the plain-http requests the live policy allowed by
// default or by a rule after priority 1450.
func TestReplayFileSampleTraffic(t *testing.T) {
	live := loadExample(t, "edge-firewall")
	lc, ec := compile(t, live), compile(t, tightenedEdge(t))
	prio := map[string]int64{}
	for _, r := range live.Rules {
		prio[r.Name] = r.Priority
	}
	data, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var want, wantRule, total uint64
	preview.ReadTraffic(bytes.NewReader(data), func(_ int, r *engine.Request) error {
		total++
		d := lc.Evaluate(r)
		if r.Scheme != "http" || d.Rule != "" && prio[d.Rule] < 1450 {
			return nil
		}
		if d.Verdict == engine.Allow {
			want++
		} else {
			wantRule++ // denied later by another rule: now denied by the new one
		}
		return nil
	})
	sum, err := preview.ReplayFile(lc, ec, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if total != 2500 || want == 0 {
		t.Fatalf("sample has %d requests, %d expected changes", total, want)
	}
	if sum.Stats.AllowToDeny != want || sum.Stats.Evaluated != total || sum.Stats.RuleChanged != wantRule || sum.Stats.Changed() != want+wantRule {
		t.Fatalf("ALLOW→DENY %d of %d (rule changed %d), want %d of %d (%d)",
			sum.Stats.AllowToDeny, sum.Stats.Evaluated, sum.Stats.RuleChanged, want, total, wantRule)
	}
	if sum.Kind != preview.KindUpdate || sum.LiveEtag != live.Etag() || sum.Stats.Window == nil ||
		!sum.Stats.Window.Start.Equal(time.Date(2025, 5, 31, 12, 8, 15, 0, time.UTC)) {
		t.Fatalf("summary %+v", sum)
	}
	t.Logf("sample traffic: %d of %d requests go ALLOW→DENY, %d change rule", want, total, wantRule)
}

func TestReplayFileNewPolicyAndDeletion(t *testing.T) {
	lc := compile(t, webPolicy())
	traffic := `{"method":"GET","path":"/admin"}` + "\n\n" + `{"method":"GET","path":"/"}`
	del, err := preview.ReplayFile(lc, nil, strings.NewReader(traffic))
	if err != nil || del.Kind != preview.KindDeletion || del.Stats.DenyToAllow != 1 {
		t.Fatalf("deletion: %v %+v", err, del.Stats.Counts)
	}
	fresh, err := preview.ReplayFile(nil, lc, strings.NewReader(traffic))
	if err != nil || fresh.Kind != preview.KindNewPolicy || fresh.Stats.AllowToDeny != 1 {
		t.Fatalf("new policy: %v %+v", err, fresh.Stats.Counts)
	}
	if _, err := preview.ReplayFile(nil, nil, strings.NewReader("")); err == nil {
		t.Fatal("no policies accepted")
	}
	other := webPolicy()
	other.Name = "shop"
	if _, err := preview.ReplayFile(lc, compile(t, other), strings.NewReader(traffic)); err == nil {
		t.Fatal("different policies accepted")
	}
	if _, err := preview.ReplayFile(lc, lc, strings.NewReader("{}\n{\"bogus\":1}\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
	var out bytes.Buffer
	preview.RenderJSON(&out, []preview.Summary{del})
	var back []preview.Summary
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back[0].Stats.DenyToAllow != 1 {
		t.Fatalf("JSON round trip: %v", err)
	}
}

func TestReadTrafficLineLimit(t *testing.T) {
	long := `{"path":"/` + strings.Repeat("a", engine.MaxRequestBytes) + `"}`
	err := preview.ReadTraffic(strings.NewReader(long), func(int, *engine.Request) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "longer") {
		t.Fatalf("err = %v", err)
	}
}
