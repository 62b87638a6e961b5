package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// decodeRepoFile decodes the repository's file rel (a path from the
// module root) into v with unmarshal (json.Unmarshal, yaml.Unmarshal).
func decodeRepoFile(t *testing.T, rel string, unmarshal func([]byte, any) error, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}
