package main

import (
	"os"
	"path/filepath"
	"regexp"
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

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	notSlug   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// TestDocsStandAlone: README.md and docs/ point only inside the
// repository (a relative link names an existing file, and its #anchor a
// heading there) or to a web address, and never at the project's
// planning files, which users of the repository do not have.
func TestDocsStandAlone(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(page, "../../")
		for _, bad := range []string{"CONTRACT.md", "../shared", "shared/DESIGN.md"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s refers to %s, outside the repository", name, bad)
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			abs, _ := filepath.Abs(path)
			root, _ := filepath.Abs("../..")
			if !strings.HasPrefix(abs, root+string(filepath.Separator)) && abs != root {
				t.Errorf("%s links to %s, outside the repository", name, target)
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, target)
				continue
			}
			if anchor != "" && !headingSlugs(t, path)[anchor] {
				t.Errorf("%s links to %s: no heading #%s there", name, target, anchor)
			}
		}
	}
}

// headingSlugs returns the anchors GitHub makes of a page's headings.
func headingSlugs(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(string(b), -1) {
		slug := notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		out[strings.ReplaceAll(slug, " ", "-")] = true
	}
	return out
}
