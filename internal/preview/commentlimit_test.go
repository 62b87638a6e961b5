package preview_test

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/preview"
)

// TestCommentOf200PoliciesFits is the failure the PR comment had: a pull
// request changing 200 policies rendered one comment of hundreds of
// thousands of characters, which GitHub refuses (and the forge's cut
// left a <details> or a code block open).
func TestCommentOf200PoliciesFits(t *testing.T) {
	var b bytes.Buffer
	if err := preview.RenderMarkdown(&b, preview.Report{Summaries: preview.Fixtures(200), Commands: true}); err != nil {
		t.Fatal(err)
	}
	t.Logf("200 policies: %d code points", utf8.RuneCount(b.Bytes()))
	for _, bad := range preview.CheckComment(b.String(), preview.MaxCommentChars) {
		t.Error(bad)
	}
}
