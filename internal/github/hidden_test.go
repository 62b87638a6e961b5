package github

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// oraclePolicy is web with a rule that keeps reading an access token (as
// main's does) and the rules given.
func oraclePolicy(rules ...string) map[string]string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n[[rules]]\nname = \"keep\"\npriority = 1\naction = \"deny\"\n" +
		"match = '\"access_token\" in request.query && request.query.access_token == \"revoked\"'\n")
	for i, r := range rules {
		fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\"\npriority = %d\naction = \"deny\"\nmatch = '%s'\n", i, i+2, r)
	}
	b.WriteString("[[tests]]\nname = \"root\"\nrequest = { path = \"/\" }\nexpect = \"allow\"\n")
	return map[string]string{"web/policy.toml": b.String()}
}

// Issue 16: per-rule counts are an oracle, even for hidden values (a rule
// testing a prefix of a live API key counts the requests whose key has
// it). The hold comment names the hidden values the pull request's added
// or changed rules read, so the writer knows what approving reveals:
// not the unchanged rule's, not a shown header's, and an attacker's name
// cannot break out of its code span.
func TestForkHoldNamesHiddenReads(t *testing.T) {
	oracle := `"x-api-key" in request.headers && request.headers["X-Api-Key"].startsWith("LIVE-A")`
	shown := `"user-agent" in request.headers && request.headers["user-agent"] == "curl"`
	inject := "\"q\" in request.headers && request.headers[\"a``\\n@team <img src=x>\"] == \"1\""
	f := newForkEnvOf(t, nil, oraclePolicy(), oraclePolicy(oracle, shown, inject))
	rec := f.record()
	want := []string{"headers.a``\n@team <img src=x>", "headers.x-api-key"}
	if !slices.Equal(rec.HiddenReads, want) {
		t.Fatalf("hidden reads %q, want %q", rec.HiddenReads, want)
	}
	body := commentBody(rec, f.l.pullSummaries(rec))
	if !strings.Contains(body, "- `headers.x-api-key`\n") || !strings.Contains(body, "- `headers.a'' @team <img src=x>`\n") {
		t.Fatalf("the hold comment does not name the hidden reads safely:\n%s", body)
	}
	if strings.Contains(body, "access_token") || strings.Contains(body, "user-agent") {
		t.Fatalf("the hold comment names an unchanged rule's or a shown value:\n%s", body)
	}
	f.approve()
	if rec := f.record(); strings.Contains(commentBody(rec, f.l.pullSummaries(rec)), "Approving reveals") {
		t.Fatal("the notice stays after the approval")
	}
}

// The record's list is bounded, and says how many it left out; each name
// in the comment is one line of bounded length.
func TestHiddenReadsBounded(t *testing.T) {
	store := newFakeStore()
	w, err := New(Config{Forge: newFakeForge(), Store: store, Examiner: loopRef{}, Experiments: experiments.New(experiments.Config{Store: store}),
		Redactor: preview.NewRedactor(nil, []string{"headers.h0"})})
	if err != nil {
		t.Fatal(err)
	}
	var matches []string
	for i := range 40 {
		matches = append(matches, fmt.Sprintf(`request.headers["h%d%s"] == "x"`, i, strings.Repeat("n", 300)))
	}
	matches = append(matches, `request.headers["h0"] == "x"`, `request.path == "/"`, `request.headers[`)
	got := w.hiddenReads(matches)
	if len(got) != raftstore.MaxHiddenReads || got[len(got)-1] != "… and 9 more" || slices.Contains(got, "headers.h0") {
		t.Fatalf("hidden reads %d: %q", len(got), got)
	}
	rec := PullRecord{Number: 1, HeadCommit: strings.Repeat("a", 40), HiddenReads: got}
	if err := rec.Validate(); err != nil {
		t.Fatal(err)
	}
	notice := hiddenReadsNotice(got)
	if n := strings.Count(notice, "\n- "); n != raftstore.MaxHiddenReads {
		t.Fatalf("%d names listed:\n%s", n, notice)
	}
	for _, line := range strings.Split(notice, "\n") {
		if strings.HasPrefix(line, "- ") && len(line) > maxCodeText+16 {
			t.Fatalf("a line of %d bytes: %q", len(line), line)
		}
	}
}
