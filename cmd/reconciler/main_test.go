package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rversion "github.com/policyrollout/reconciler/internal/version"
)

// cli runs one command line in-process.
func cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{ctx: context.Background(), stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut}
	code = a.run(args)
	return code, out.String(), errOut.String()
}

func TestRunUsesRealStreams(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "version: "+rversion.Current+"\n") {
		t.Errorf("run version = %d %q %q", code, out.String(), errOut.String())
	}
}

func TestUsageAndHelp(t *testing.T) {
	code, out, errOut := cli(t, "")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "Usage: reconciler") {
		t.Errorf("no args = %d %q %q", code, out, errOut)
	}
	code, out, _ = cli(t, "", "help")
	if code != 0 {
		t.Errorf("help = %d", code)
	}
	for _, name := range []string{"serve", "validate", "test", "merge", "eval", "replay", "status", "rollback", "version", "help"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
	}
	if code, out, _ := cli(t, "", "--help"); code != 0 || !strings.Contains(out, "Commands:") {
		t.Errorf("--help = %d %q", code, out)
	}
	if code, out, _ := cli(t, "", "help", "merge"); code != 0 || !strings.Contains(out, "-strategy") {
		t.Errorf("help merge = %d %q", code, out)
	}
	if code, _, _ := cli(t, "", "help", "nope"); code != exitUsage {
		t.Errorf("help nope = %d", code)
	}
	code, out, errOut = cli(t, "", "frobnicate")
	if code != exitUsage || out != "" || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command = %d %q %q", code, out, errOut)
	}
	if code, _, _ := cli(t, "", "validate", "-h"); code != 0 {
		t.Errorf("validate -h = %d", code)
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"validate", "--nope"},
		{"validate", "a", "b"},
		{"validate", "--merge-default", "sometimes", "testdata/good"},
		{"test", "--merge-default", "x"},
		{"merge"},
		{"merge", "--strategy", "union", "testdata/merge/base.toml"},
		{"merge", "--format", "yaml", "testdata/merge/base.toml"},
		{"eval"},
		{"eval", "--policy", "testdata/good/web", "extra"},
		{"eval", "--policy", "testdata/good/web", "--merge-default", "x"},
		{"version", "now"},
		{"serve", "--bogus"},
		{"serve", "extra"},
	} {
		code, out, errOut := cli(t, "", args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("%v = %d, stdout %q, stderr %q; want 2 and a message", args, code, out, errOut)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "", "version")
	// A test binary embeds no checkout: the commit is unknown, the
	// version is still the release.
	if code != 0 || !strings.Contains(out, "version: "+rversion.Current+"\n") || !strings.Contains(out, "commit: unknown") || !strings.Contains(out, "go: go1.") {
		t.Errorf("version = %d %q", code, out)
	}
}

func TestValidate(t *testing.T) {
	code, out, errOut := cli(t, "", "validate", "testdata/good")
	if code != 0 || out != "1 policies, 3 rules, 3 tests passed\n" || errOut != "" {
		t.Errorf("validate good = %d %q %q", code, out, errOut)
	}
	code, out, errOut = cli(t, "", "validate", "testdata/bad")
	if code != exitCheck {
		t.Errorf("validate bad = %d", code)
	}
	for _, want := range []string{
		filepath.Join("testdata", "bad", "broken", "policy.toml") + ":3: ",
		"pth",
		filepath.Join("testdata", "bad", "failing", "policy.toml") + ":14: ",
		"wrong-expectation",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("validate bad stderr lacks %q:\n%s", want, errOut)
		}
	}
	if out != "" || !strings.Contains(errOut, "2 problems found; 2 policies valid, 1 tests passed") {
		t.Errorf("validate bad: stdout %q (want nothing), stderr lacks the summary:\n%s", out, errOut)
	}
	if code, _, errOut := cli(t, "", "validate", "testdata/does-not-exist"); code != exitCheck || errOut == "" {
		t.Errorf("validate missing dir = %d %q", code, errOut)
	}
}

func TestValidateDefaultDir(t *testing.T) {
	t.Chdir("testdata/good")
	if code, out, errOut := cli(t, "", "validate"); code != 0 || !strings.HasPrefix(out, "1 policies") {
		t.Errorf("validate . = %d %q %q", code, out, errOut)
	}
}

func TestTestCommand(t *testing.T) {
	code, out, _ := cli(t, "", "test", "testdata/good")
	if code != 0 || !strings.Contains(out, "PASS web/health-allowed\n") || !strings.Contains(out, "3 tests: 3 ok, 0 failing") {
		t.Errorf("test good = %d %q", code, out)
	}
	code, out, errOut := cli(t, "", "test", "testdata/bad")
	if code != exitCheck {
		t.Errorf("test bad = %d", code)
	}
	wantFail := "FAIL failing/wrong-expectation " + filepath.Join("testdata", "bad", "failing", "policy.toml") + ":14: "
	if !strings.Contains(out, "PASS failing/passes\n") || !strings.Contains(out, wantFail) {
		t.Errorf("test bad stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "pth") {
		t.Errorf("compile errors not reported: %q", errOut)
	}
}

func TestMerge(t *testing.T) {
	base, extra := "testdata/merge/base.toml", "testdata/merge/extra.toml"
	code, out, errOut := cli(t, "", "merge", base, extra)
	if code != exitCheck || out != "" || !strings.Contains(errOut, base) || !strings.Contains(errOut, extra) {
		t.Errorf("merge fail = %d %q %q; want both files named", code, out, errOut)
	}
	code, out, _ = cli(t, "", "merge", "--strategy", "override", base, extra)
	if code != 0 || !strings.Contains(out, `request.path == "/health"'`) || strings.Contains(out, "/healthz") || !strings.Contains(out, "[[rules]]") {
		t.Errorf("merge override = %d\n%s", code, out)
	}
	code, out, _ = cli(t, "", "merge", "--strategy", "maintain", "--format", "json", base, extra)
	var p struct {
		Rules []struct{ Name, Match string } `json:"rules"`
	}
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || len(p.Rules) != 2 || !strings.Contains(p.Rules[0].Match, "/healthz") {
		t.Errorf("merge maintain json = %d %v\n%s", code, err, out)
	}
	if code, _, errOut := cli(t, "", "merge", "testdata/merge/missing.toml"); code != exitCheck || errOut == "" {
		t.Errorf("merge missing file = %d %q", code, errOut)
	}
}

func TestEval(t *testing.T) {
	code, out, errOut := cli(t, "", "eval", "--policy", "testdata/good/web", "--input", "testdata/requests/health.json")
	var d map[string]any
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil {
		t.Fatalf("eval = %d %v %q %q", code, err, out, errOut)
	}
	if d["decision"] != "ALLOW" || d["rule"] != "health" || d["policy"] != "policies/web" || d["etag"] == "" {
		t.Errorf("decision = %v", d)
	}
	code, out, _ = cli(t, `{"path":"/","source_ip":"10.1.0.9"}`, "eval", "--policy", "testdata/good/web")
	if code != 0 || !strings.Contains(out, `"rule":"office-network"`) {
		t.Errorf("eval from stdin = %d %q", code, out)
	}
	code, out, _ = cli(t, `{"path":"/"}`, "eval", "--policy", "testdata/good/web", "--input", "-")
	if code != 0 || !strings.Contains(out, `"decision":"DENY"`) {
		t.Errorf("eval default action = %d %q", code, out)
	}
	for name, tc := range map[string]struct{ stdin, policy string }{
		"bad request":   {`{"pth":"/"}`, "testdata/good/web"},
		"bad JSON":      {`{`, "testdata/good/web"},
		"invalid rule":  {`{}`, "testdata/bad/broken"},
		"missing dir":   {`{}`, "testdata/nope"},
		"missing input": {"", "testdata/good/web"},
	} {
		if code, _, errOut := cli(t, tc.stdin, "eval", "--policy", tc.policy); code != exitCheck || errOut == "" {
			t.Errorf("%s: %d %q", name, code, errOut)
		}
	}
	if code, _, _ := cli(t, "", "eval", "--policy", "testdata/good/web", "--input", "testdata/nope.json"); code != exitCheck {
		t.Errorf("missing input file = %d", code)
	}
}

func TestServeConfigErrors(t *testing.T) {
	if code, _, errOut := cli(t, "", "serve", "--config", filepath.Join(t.TempDir(), "none.toml")); code != exitCheck || !strings.Contains(errOut, "none.toml") {
		t.Errorf("missing config = %d %q", code, errOut)
	}
	path := writeServeConfig(t, "127.0.0.1:0", "text")
	if code, _, errOut := cli(t, "", "serve", "--config", path, "--http-addr", "nope"); code != exitUsage || !strings.Contains(errOut, "node.http_addr") {
		t.Errorf("bad override = %d %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(bad, []byte("[node]\nidd = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, "", "serve", "--config", bad); code != exitCheck || !strings.Contains(errOut, "node.idd") {
		t.Errorf("unknown key = %d %q", code, errOut)
	}
}
