package preview

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/engine"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// pullReport is a pull request's comment as the GitHub worker asks for it.
func pullReport(sums []Summary, limit int) Report {
	return Report{Title: "Policy preview of #7 at 0123456789ab", Summaries: sums, Commands: true, Limit: limit,
		FullReport: FullReport("pr-7")}
}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from its golden file (run go test -run %s -update and review the diff)", path, t.Name())
	}
}

// checkWhole asserts that every policy has its table row, and that its
// section is in body whole or not at all; it returns how many are shown.
func checkWhole(t *testing.T, body string, sums []Summary) (shown int) {
	t.Helper()
	for _, s := range sums {
		sec := section(s)
		head, _, _ := strings.Cut(sec, "\n")
		switch {
		case strings.Contains(body, sec):
			shown++
		case strings.Contains(body, head):
			t.Errorf("the section of %s is cut inside", s.Policy)
		}
	}
	return shown
}

func TestCommentGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies int
		limit    int
		allShown bool
	}{
		{"comment_1", 1, 0, true},
		{"comment_5", 5, 0, true},
		{"comment_200", 200, 0, false},
		{"comment_cut", 5, 6000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sums := Fixtures(tc.policies)
			var b bytes.Buffer
			if err := RenderMarkdown(&b, pullReport(sums, tc.limit)); err != nil {
				t.Fatal(err)
			}
			body := b.String()
			limit := orLimit(tc.limit, CommentBudget)
			for _, bad := range CheckComment(body, limit) {
				t.Error(bad)
			}
			shown := checkWhole(t, body, sums)
			t.Logf("%d policies: %d code points, %d sections shown", tc.policies, utf8.RuneCountInString(body), shown)
			if tc.allShown != (shown == len(sums)) {
				t.Errorf("%d of %d sections shown", shown, len(sums))
			}
			cut := strings.Contains(body, "Cut to fit one GitHub comment")
			if cut == tc.allShown || !strings.Contains(body, "experiments/pr-7?view=FULL") {
				t.Errorf("cut line %t with %d of %d sections; or no pointer to the full report", cut, shown, len(sums))
			}
			for _, s := range sums { // every policy has its row here
				if !strings.Contains(body, "| "+code(strings.TrimPrefix(s.Policy, "policies/"))+" | ") {
					t.Errorf("no table row for %s", s.Policy)
				}
			}
			golden(t, tc.name, body)
		})
	}
}

func orLimit(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// TestCommentCutsTableRows: with more policies than rows fit, the table
// ends on a whole row and the cut line says how many rows are missing.
func TestCommentCutsTableRows(t *testing.T) {
	sums := Fixtures(2000)
	body := pullReport(sums, 0).markdown()
	for _, bad := range CheckComment(body, CommentBudget) {
		t.Error(bad)
	}
	if !strings.Contains(body, "rows of the table") || !strings.HasSuffix(body, "`/reconciler commit`\n") {
		t.Errorf("no cut line or no commands: …%s", body[len(body)-400:])
	}
	shown := checkWhole(t, body, sums)
	t.Logf("2000 policies: %d code points, %d sections shown", utf8.RuneCountInString(body), shown)
	if shown == 0 || !strings.Contains(body, section(Fixture(3))) {
		t.Errorf("the table took the whole comment: %d sections, none for failing policy-003", shown)
	}
}

// TestCommentOrdersFailingFirst: the failing policies come first, in the
// table and the sections, so a cut never hides them.
func TestCommentOrdersFailingFirst(t *testing.T) {
	body := pullReport(Fixtures(200), 0).markdown()
	first := strings.Index(body, "<details><summary>")
	if !strings.HasPrefix(body[first:], "<details><summary>policy-003: FAILING</summary>") {
		t.Errorf("first section: %.80s", body[first:])
	}
	for i := 3; i < 200; i += 7 {
		if s := Fixture(i); !strings.Contains(body, section(s)) {
			t.Errorf("failing %s has no section", s.Policy)
		}
	}
}

// hostile are names a pull request may choose to break out of the table,
// a code span or block, or a <details> section.
var hostile = []string{
	"</details><img src=x onerror=alert(1)>", "a|b", `a\|b`, "`", "``x``", "```", "a\nb\r\n| x |", "@admin", "$x$",
	"<!-- x", "</summary></details>\n\n<details>", "[link](https://evil.example)", "a\\", "*_~", "&lt;script&gt;", "a\u202eevil\u200b", "a\u2028b",
}

// TestCommentEscapesHostileNames: names from the pull request stay inert
// in every place they appear.
func TestCommentEscapesHostileNames(t *testing.T) {
	for _, name := range hostile {
		body := pullReport([]Summary{hostileSummary(name, name, name)}, 0).markdown()
		for _, bad := range CheckComment(body, CommentBudget) {
			t.Errorf("%q: %s", name, bad)
		}
	}
}

// hostileSummary puts policy, rule and value where a pull request would.
func hostileSummary(policy, rule, value string) Summary {
	s := Fixture(3) // failing, with samples
	s.Policy, s.Experiment, s.Reason, s.NotPreviewed = "policies/"+policy, "policies/"+policy+"/experiments/pr-7", value, value
	s.ExperimentEtag, s.LiveEtag = value, value
	s.Stats.Transitions = append(s.Stats.Transitions, Transition{LiveRule: rule, ExperimentRule: rule,
		LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: 99})
	s.Stats.Samples = []Sample{{LiveRule: rule, ExperimentRule: rule, LiveDecision: engine.Allow, ExperimentDecision: engine.Deny,
		Request: map[string]any{"path": value, rule: value, "source_ip": value}}}
	s.Stats.Nodes = append(s.Stats.Nodes, NodeCoverage{Node: value})
	s.ListChanges = []ListChange{{Name: value, File: "_lists/" + value, Added: 1, Removed: 2, Entries: 3}}
	return s
}

// TestCommentShowsListChanges: a pull request that changes lists says,
// per list, the entries added and removed, beside what it does to live
// traffic and the top source addresses of its sample changes.
func TestCommentShowsListChanges(t *testing.T) {
	s := Fixture(1)
	s.ListChanges = []ListChange{
		{Name: "blocklist", File: "_lists/blocklist.netset", Added: 1000, Removed: 0, Entries: 1_001_000},
		{Name: "retired-hosts", File: "_lists/retired-hosts.txt", Added: 2, Removed: 1, Entries: 40},
	}
	for i := range s.Stats.Samples {
		s.Stats.Samples[i].Request["source_ip"] = []string{"192.0.2.7", "192.0.2.7", "2001:db8::9"}[i%3]
	}
	body := pullReport([]Summary{s}, 0).markdown()
	for _, bad := range CheckComment(body, CommentBudget) {
		t.Error(bad)
	}
	for _, want := range []string{"| `blocklist` | `_lists/blocklist.netset` | 1000 | 0 | 1001000 |",
		"| `192.0.2.7` | 2 |", "| `2001:db8::9` | 1 |"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the comment", want)
		}
	}
	golden(t, "comment_lists", body)
}

// FuzzCommentNames: whatever the names and values, the comment stays
// within the limit and balanced, with no raw HTML.
func FuzzCommentNames(f *testing.F) {
	for _, h := range hostile {
		f.Add(h, h, h, 30)
	}
	f.Add("web", "deny-all", "/admin", 200)
	f.Fuzz(func(t *testing.T, policy, rule, value string, n int) {
		n = max(1, min(n, 300))
		sums := Fixtures(n)
		sums[0] = hostileSummary(policy, rule, value)
		sums[n-1] = hostileSummary(rule, value, policy)
		for _, limit := range []int{0, 5000} {
			body := pullReport(sums, limit).markdown()
			for _, bad := range CheckComment(body, orLimit(limit, CommentBudget)) {
				t.Errorf("limit %d: %s", limit, bad)
			}
		}
	})
}

// BenchmarkComment200 renders a 200-policy comment (every section, then
// the cut).
func BenchmarkComment200(b *testing.B) {
	r := pullReport(Fixtures(200), 0)
	for b.Loop() {
		_ = r.markdown()
	}
}
