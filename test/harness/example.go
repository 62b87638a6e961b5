package harness

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ExampleFiles reads policies.example (without the traffic) as repository
// files, path → content.
func ExampleFiles(t testing.TB) map[string]string {
	t.Helper()
	root := filepath.Join(ModuleRoot(), "policies.example")
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, "_traffic") {
			return nil
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// ExampleTraffic reads the example traffic (policies.example/_traffic/
// sample.jsonl), one request per line, blank lines left out.
func ExampleTraffic(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ModuleRoot(), "policies.example", "_traffic", "sample.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
