package harness

import (
	"bufio"
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

// TrafficSample reads policies.example/_traffic/sample.jsonl: one
// decision request per line, blank lines dropped.
func TrafficSample(t testing.TB) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(ModuleRoot(), "policies.example", "_traffic", "sample.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
