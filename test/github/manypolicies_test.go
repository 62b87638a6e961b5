package github_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/mdcheck"
	"github.com/policyrollout/reconciler/internal/preview"
)

// TestManyPoliciesCommentAccepted: a pull request adding 150 policies
// gets one preview comment that GitHub (the emulator refuses a body over
// 65,536 characters, 422 "Body is too long") accepts, that names every
// policy in its summary table, leaves no section, table or code block
// cut inside, and says where the full report is. Before, the comment
// rendered every policy in full and the forge cut it at the limit,
// mid-table, dropping the last policies.
func TestManyPoliciesCommentAccepted(t *testing.T) {
	e := newEnv(t)
	const many = 150
	files := map[string]string{}
	for i := range many {
		files[fmt.Sprintf("p%03d/policy.toml", i)] = webPolicy(fmt.Sprintf("/p%d", i))
	}
	n, head := e.openPullFiles("many", files, "add many policies")
	e.gh.WaitStatus(head, forge.ContextValidate, forge.StateSuccess)

	var body string
	eventually(t, "one preview comment naming every policy", func() error {
		cs := e.gh.MarkedComments(n)
		if len(cs) != 1 || !strings.Contains(cs[0].Body, head[:12]) {
			return fmt.Errorf("%d comments at head %s", len(cs), head[:12])
		}
		body = cs[0].Body
		for i := range many {
			if name := fmt.Sprintf("p%03d", i); !strings.Contains(body, name) {
				return fmt.Errorf("policy %s not in the comment (%d code points)", name, utf8.RuneCountInString(body))
			}
		}
		return nil
	})
	for i := range many {
		if name := fmt.Sprintf("p%03d", i); !strings.Contains(body, "| `"+name+"` |") {
			t.Errorf("policy %s has no row in the comment's table", name)
		}
	}
	t.Logf("%d policies: a comment of %d code points, %d sections", many, utf8.RuneCountInString(body),
		strings.Count(body, "<details><summary>p"))
	for _, bad := range mdcheck.Check(body, preview.MaxCommentChars, forge.Marker) {
		t.Error(bad)
	}
	if !strings.Contains(body, fmt.Sprintf("experiments/pr-%d?view=FULL", n)) {
		t.Error("the comment does not say where the full report is")
	}
}
