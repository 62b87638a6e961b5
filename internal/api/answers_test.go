package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

var updateAnswers = flag.Bool("update-answers", false, "rewrite testdata/edge-firewall-answers.txt from the current code")

const answersFile = "testdata/edge-firewall-answers.txt"

// TestSampleAnswersUnchanged posts the 2,500 requests of
// policies.example/_traffic over loopback HTTP to :evaluate on
// edge-firewall and compares each answer's decision, rule and error with
// the ones recorded before the decision path was tuned (issue 26): a
// faster path that answers differently is a regression, not a speed-up.
// After a deliberate change to the example policy or traffic, rewrite the
// file with -update-answers and review its diff.
func TestSampleAnswersUnchanged(t *testing.T) {
	t.Parallel()
	files, err := policy.ReadTree(os.DirFS("../../policies.example"))
	if err != nil {
		t.Fatal(err)
	}
	e := treeEnv(t, files)

	samples, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(samples))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		n++
		a := e.do("POST", "/v1/policies/edge-firewall:evaluate", bytes.NewReader(line), map[string]string{"Content-Type": "application/json"})
		if a.code != 200 {
			t.Fatalf("sample %d: %d %s", n, a.code, a.body)
		}
		var d struct{ Decision, Rule, Error string }
		if err := json.Unmarshal(a.body, &d); err != nil {
			t.Fatalf("sample %d: %v: %s", n, err, a.body)
		}
		fmt.Fprintf(&got, "%d %s %s %q\n", n, d.Decision, d.Rule, d.Error)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2500 {
		t.Fatalf("%d samples, want 2500", n)
	}
	if *updateAnswers {
		if err := os.WriteFile(answersFile, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(answersFile)
	if err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d answers, %s has %d", len(gotLines)-1, answersFile, len(wantLines)-1)
	}
	diff := 0
	for i := range gotLines {
		if gotLines[i] != wantLines[i] {
			diff++
			if diff <= 10 {
				t.Errorf("answer changed: got %s, want %s", gotLines[i], wantLines[i])
			}
		}
	}
	if diff > 0 {
		t.Errorf("%d of %d answers changed", diff, n)
	}
}

// treeEnv serves the policies tree files (lists included) as generation 1.
func treeEnv(t *testing.T, files map[string][]byte) *testEnv {
	t.Helper()
	b, errs := engine.CompileTree(files, policy.LoadOptions{}, engine.DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 1, Bundle: b})
	return newTestEnv(t, Config{Generations: gens})
}
