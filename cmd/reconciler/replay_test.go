package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
)

const sampleTraffic = "../../policies.example/_traffic/sample.jsonl"

// runReplay runs the replay command in-process (it is called directly
// so that it can be tested before it is in the command table).
func runReplay(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	code = a.replay(args)
	return code, out.String(), errb.String()
}

// tightenedRoot copies policies.example and adds, in the copy's
// edge-firewall, a fragment denying plain http after the probe filters.
func tightenedRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "policies")
	if err := os.CopyFS(root, os.DirFS("../../policies.example")); err != nil {
		t.Fatal(err)
	}
	frag := `[[rules]]
name = "deny-plaintext-everywhere"
priority = 1450
action = "deny"
match = "request.scheme == 'http'"
`
	if err := os.WriteFile(filepath.Join(root, "edge-firewall", "tighten.toml"), []byte(frag), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestReplayCommandCountsChanges(t *testing.T) {
	exp := filepath.Join(tightenedRoot(t), "edge-firewall")
	code, out, errOut := runReplay(t, "--live", "../../policies.example/edge-firewall", "--experiment", exp,
		"--traffic", sampleTraffic, "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sums []preview.Summary
	if err := json.Unmarshal([]byte(out), &sums); err != nil || len(sums) != 1 {
		t.Fatalf("json output %q: %v", out, err)
	}
	s := sums[0]
	// 15 plain-http requests the live policy allowed (by default or after
	// priority 1450) become DENY; 3 denied later now deny by the new rule.
	// internal/preview's TestReplayFileSampleTraffic derives these numbers
	// from the live policy's decisions alone.
	if s.Stats.Evaluated != 2500 || s.Stats.AllowToDeny != 15 || s.Stats.RuleChanged != 3 || s.Stats.DenyToAllow != 0 {
		t.Fatalf("counts %+v", s.Stats.Counts)
	}
	if s.Policy != "policies/edge-firewall" || s.Kind != preview.KindUpdate || s.LiveEtag == s.ExperimentEtag {
		t.Fatalf("summary %+v", s)
	}
}

func TestReplayCommandFormatsAndThresholds(t *testing.T) {
	exp := filepath.Join(tightenedRoot(t), "edge-firewall")
	base := []string{"--live", "../../policies.example/edge-firewall", "--experiment", exp, "--traffic", sampleTraffic}
	code, out, _ := runReplay(t, base...)
	if code != exitOK || !strings.Contains(out, "15 allow->deny") || !strings.Contains(out, "deny-plaintext-everywhere") {
		t.Fatalf("text: exit %d\n%s", code, out)
	}
	code, out, _ = runReplay(t, append(base, "--format", "markdown")...)
	if code != exitOK || !strings.HasPrefix(out, preview.Marker) || !strings.Contains(out, "| Recorded | 2500 |") {
		t.Fatalf("markdown: exit %d\n%s", code, out)
	}
	code, _, errOut := runReplay(t, append(base, "--max-allow-to-deny-ratio", "0.001")...)
	if code != exitCheck || !strings.Contains(errOut, "max_allow_to_deny_ratio") {
		t.Fatalf("threshold: exit %d, %q", code, errOut)
	}
	if code, _, _ := runReplay(t, append(base, "--max-allow-to-deny-ratio", "0.01")...); code != exitOK {
		t.Fatalf("a ratio under the threshold exits %d", code)
	}
}

func TestReplayCommandDeletionAndNewPolicy(t *testing.T) {
	code, out, errOut := runReplay(t, "--live", "../../policies.example/admin-api", "--traffic", sampleTraffic, "--format", "json")
	if code != exitOK || !strings.Contains(out, `"kind": "deletion"`) {
		t.Fatalf("deletion: exit %d %s %s", code, out, errOut)
	}
	code, out, errOut = runReplay(t, "--experiment", "../../policies.example/admin-api", "--traffic", sampleTraffic, "--format", "json")
	if code != exitOK || !strings.Contains(out, `"kind": "new-policy"`) {
		t.Fatalf("new policy: exit %d %s %s", code, out, errOut)
	}
}

func TestReplayCommandErrors(t *testing.T) {
	live := "../../policies.example/edge-firewall"
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--live", live}, exitUsage, "--traffic is required"},
		{[]string{"--traffic", sampleTraffic}, exitUsage, "--live, --experiment or both"},
		{[]string{"--live", live, "--traffic", sampleTraffic, "--format", "yaml"}, exitUsage, "--format"},
		{[]string{"--live", live, "--traffic", sampleTraffic, "extra"}, exitUsage, "wrong number"},
		{[]string{"--live", live, "--experiment", "../../policies.example/admin-api", "--traffic", sampleTraffic}, exitCheck, "keeps the live policy's name"},
		{[]string{"--live", live, "--traffic", "does-not-exist.jsonl"}, exitCheck, "does-not-exist"},
		{[]string{"--live", "testdata/bad/broken", "--traffic", sampleTraffic}, exitCheck, "policy.toml"},
	} {
		code, _, errOut := runReplay(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

func TestReplayCommandRedactsSamples(t *testing.T) {
	dir := t.TempDir()
	traffic := filepath.Join(dir, "t.jsonl")
	os.WriteFile(traffic, []byte(`{"method":"GET","scheme":"http","path":"/x","host":"www.example.com","source_ip":"73.140.173.241","headers":{"authorization":"Bearer hunter2"},"query":{"k":"topsecret"}}`+"\n"), 0o644)
	exp := filepath.Join(tightenedRoot(t), "edge-firewall")
	for _, format := range []string{"text", "markdown", "json"} {
		code, out, errOut := runReplay(t, "--live", "../../policies.example/edge-firewall", "--experiment", exp,
			"--traffic", traffic, "--format", format, "--redact", "query.k")
		if code != exitOK || strings.Contains(out, "hunter2") || strings.Contains(out, "topsecret") || !strings.Contains(out, "REDACTED") {
			t.Errorf("%s: exit %d %s\n%s", format, code, errOut, out)
		}
	}
}

// Through the command table, as a user runs it.
func TestReplayViaCLI(t *testing.T) {
	exp := filepath.Join(tightenedRoot(t), "edge-firewall")
	code, out, errOut := cli(t, "", "replay", "--live", "../../policies.example/edge-firewall", "--experiment", exp,
		"--traffic", sampleTraffic)
	if code != exitOK || !strings.Contains(out, "15 allow->deny") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := cli(t, "", "help", "replay"); code != exitOK || !strings.Contains(out, "-traffic") {
		t.Fatalf("help replay = %d %q", code, out)
	}
}
