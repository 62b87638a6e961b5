package main

import (
	"errors"
	"fmt"
	"github.com/policyrollout/reconciler/test/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/sandbox"
)

// writeRules writes policy name under root with n trivial rules.
func writeRules(t *testing.T, root, name string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("default_action = \"deny\"\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[[rules]]\nname = \"rule-%06d\"\npriority = %d\naction = \"deny\"\nmatch = \"request.path == '/a/long/path/to/make/the/file/bigger/%d'\"\n", i, i, i)
	}
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestValidateAppliesTheLeadersBudgets (issue 16, attack 7): a 12 MB tree
// of 100,000 rules passed `validate` and was INVALID on the cluster. Now
// validate refuses it, and refuses a tree under the size budget but over
// the rules budget with exactly the leader's problems.
func TestValidateAppliesTheLeadersBudgets(t *testing.T) {
	huge := t.TempDir()
	for i := 0; i < 20; i++ {
		writeRules(t, huge, fmt.Sprintf("p%02d", i), 5_000)
	}
	code, _, errOut := cli(t, "", "validate", huge)
	if code != exitCheck || !strings.Contains(errOut, "policies root too large: over 8388608 bytes") {
		t.Fatalf("a 100,000 rule tree: exit %d\n%s", code, errOut)
	}

	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		writeRules(t, dir, fmt.Sprintf("p%d", i), 4_000)
	}
	code, _, errOut = cli(t, "", "validate", dir)
	if code != exitCheck || !strings.Contains(errOut, "p2/policy.toml: with this policy the tree has 12000 rules, over the limit of 10000") {
		t.Fatalf("12,000 rules: exit %d\n%s", code, errOut)
	}
	// the leader, given the same files, says the same
	files, err := policy.ReadTree(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	v := reconcile.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
	if len(v.Problems) != 1 || !strings.Contains(errOut, filepath.Join(dir, v.Problems[0])) {
		t.Errorf("leader's problems %q, validate's:\n%s", v.Problems, errOut)
	}
}

// TestValidateIgnoresLinks (issue 16, attack 8): validate followed a link
// out of the tree to a secrets file and printed its key names as unknown
// keys. The leader reads git trees, where links are not files; validate
// now reads the same way.
func TestValidateIgnoresLinks(t *testing.T) {
	outside := t.TempDir()
	secrets := filepath.Join(outside, "secrets.env.toml")
	if err := os.WriteFile(secrets, []byte("AWS_SECRET_ACCESS_KEY = \"x\"\nDB_PASSWORD = \"y\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeRules(t, dir, "web", 1)
	if err := os.Symlink(secrets, filepath.Join(dir, "web", "leak.toml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "", "validate", dir)
	if code != exitOK || strings.Contains(out+errOut, "SECRET") || strings.Contains(out+errOut, "PASSWORD") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestEvalAndMergeStayInTheTree: like validate, eval and merge read through
// os.Root, so a fragment linked to a file outside the tree is refused,
// never read (its keys would be printed as unknown keys).
func TestEvalAndMergeStayInTheTree(t *testing.T) {
	outside := t.TempDir()
	secrets := filepath.Join(outside, "secrets.toml")
	if err := os.WriteFile(secrets, []byte("AWS_SECRET_ACCESS_KEY = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeRules(t, dir, "web", 1)
	if err := os.Symlink(secrets, filepath.Join(dir, "web", "leak.toml")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"eval", "--policy", filepath.Join(dir, "web")},
		{"merge", filepath.Join(dir, "web", "policy.toml"), filepath.Join(dir, "web", "leak.toml")},
	} {
		code, out, errOut := cli(t, `{"path":"/"}`, args...)
		if code == exitOK || strings.Contains(out+errOut, "AWS_SECRET") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// TestValidateWorkerIsHidden: the child of sandbox.Runner is not a
// command people are shown, and it refuses a missing or bad limit before
// reading anything.
func TestValidateWorkerIsHidden(t *testing.T) {
	if _, out, _ := cli(t, "", "help"); strings.Contains(out, sandbox.WorkerCommand) || !strings.Contains(out, "validate") {
		t.Fatalf("help lists the worker, or nothing:\n%s", out)
	}
	for _, args := range [][]string{{}, {"0"}, {"lots"}, {"1", "2"}} {
		code, _, errOut := cli(t, "{}", append([]string{sandbox.WorkerCommand}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "LIMIT") {
			t.Errorf("validate-worker %q = %d %q, want usage", args, code, errOut)
		}
	}
}

// writeHeavy writes policies that are within every budget but take about
// 200 MiB to compile: 5 policies of 1,000 rules of 12 prefix tests.
func writeHeavy(t *testing.T, root string) {
	t.Helper()
	for p := range 5 {
		var b strings.Builder
		b.WriteString("default_action = \"allow\"\n")
		for r := range 1_000 {
			terms := make([]string, 12)
			for k := range terms {
				terms[k] = fmt.Sprintf("request.path.startsWith('/p%d/r%d/x%d')", p, r, k)
			}
			fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"deny\"\nmatch = '''%s'''\n", r, r+1, strings.Join(terms, " || "))
		}
		dir := filepath.Join(root, fmt.Sprintf("p%d", p))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestValidateUsesTheClustersLimits (issue 16, attack 7): `validate`
// judges a tree in the same bounded child as the leader, with the limits
// of the node config it is given, so a tree the cluster's child cannot
// validate fails locally too, with the leader's message; within the
// default limits the same tree passes.
func TestValidateUsesTheClustersLimits(t *testing.T) {
	bin := harness.Binary(t)
	tree := t.TempDir()
	writeHeavy(t, tree)
	cfg := writeServeConfig(t, "127.0.0.1:0", "json")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "\n[validation]\nmemory_limit_bytes = 67108864\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = harness.ChildEnv()
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	code, out := run("validate", "--config", cfg, tree)
	if code != exitCheck || !strings.Contains(out, sandbox.BudgetMessage) || !strings.Contains(out, "limit 64 MiB") {
		t.Fatalf("with a 64 MiB child: exit %d\n%s", code, out)
	}
	if code, out := run("validate", tree); code != exitOK || !strings.Contains(out, "5 policies, 5000 rules") {
		t.Fatalf("with the default limits: exit %d\n%s", code, out)
	}
}
