package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeCarriesPreview: a rule's preview key survives merge from TOML,
// JSON and YAML, and a later file's definition (OVERRIDE) wins whole, its
// preview key included.
func TestMergeCarriesPreview(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"a.toml": "default_action = \"allow\"\n\n[[rules]]\nname = \"r\"\npriority = 1\naction = \"deny\"\nmatch = \"request.path == '/x'\"\npreview = true\n",
		"b.json": `{"rules":[{"name":"s","priority":2,"action":"deny","match":"request.path == '/y'","preview":true}]}`,
		"c.yaml": "rules:\n  - name: t\n    priority: 3\n    action: deny\n    match: request.path == '/z'\n    preview: true\n",
		"d.toml": "[[rules]]\nname = \"r\"\npriority = 1\naction = \"deny\"\nmatch = \"request.path == '/x'\"\n",
	}
	var paths []string
	for _, name := range []string{"a.toml", "b.json", "c.yaml", "d.toml"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(files[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	code, out, errOut := cli(t, "", append([]string{"merge"}, paths[:3]...)...)
	if code != 0 || strings.Count(out, "preview = true") != 3 {
		t.Fatalf("merge = %d %q\n%s", code, errOut, out)
	}
	code, out, errOut = cli(t, "", append([]string{"merge", "--strategy", "override"}, paths...)...)
	if code != 0 || strings.Count(out, "preview = true") != 2 || !strings.Contains(out, "name = \"r\"") {
		t.Fatalf("override = %d %q\n%s", code, errOut, out)
	}
}
