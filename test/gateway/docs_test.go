package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestDocsGiveTheTestedConfiguration: docs/gateways.md shows, verbatim, the
// nginx configuration that TestNginx runs, so a newcomer copies a tested one.
func TestDocsGiveTheTestedConfiguration(t *testing.T) {
	doc := readDoc(t)
	for _, name := range []string{gatewayConf, checkConf} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if block := "```nginx\n" + string(data) + "```\n"; !strings.Contains(doc, block) {
			t.Errorf("docs/gateways.md does not show testdata/%s verbatim in an nginx block", name)
		}
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(), "docs", "gateways.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
