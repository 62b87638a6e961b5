package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeCommandTable: the README's command table lists exactly the
// commands `reconciler help` lists, read from commands(), so a command
// added or renamed later needs its row.
func TestReadmeCommandTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := readmeCommands(t, string(b))
	known := map[string]bool{}
	for _, c := range commands() {
		known[c.name] = true
		if !documented[c.name] {
			t.Errorf("README.md's command table has no row for %q", c.name)
		}
	}
	for name := range documented {
		if !known[name] {
			t.Errorf("README.md's command table lists %q, which reconciler does not have", name)
		}
	}
}

// readmeCommands returns the first word of the first cell of each row of
// the table under "## Commands".
func readmeCommands(t *testing.T, readme string) map[string]bool {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Commands\n")
	if !ok {
		t.Fatal(`README.md has no "## Commands" section`)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	out := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cell, ok := strings.CutPrefix(line, "| `")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(strings.Fields(cell)[0], "`"), "`")
		out[name] = true
	}
	if len(out) == 0 {
		t.Fatal("README.md's command table has no rows")
	}
	return out
}
