package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeReadsJSONAndYAML: merge reads policy files in JSON and YAML
// (Keystone's policy.json and policy.yaml) in the schema of the TOML
// files, with the same strategies, and reads its own --format json
// output back to the same policy.
func TestMergeReadsJSONAndYAML(t *testing.T) {
	base := "testdata/merge/base.toml"
	code, want, errOut := cli(t, "", "merge", "--strategy", "override", base, "testdata/merge/extra.toml")
	if code != 0 {
		t.Fatalf("toml = %d %q", code, errOut)
	}
	for _, extra := range []string{"testdata/merge/extra.json", "testdata/merge/extra.yaml"} {
		if code, out, errOut := cli(t, "", "merge", "--strategy", "override", base, extra); code != 0 || out != want {
			t.Errorf("%s override = %d %q\n%s\nwant\n%s", extra, code, errOut, out, want)
		}
		code, out, errOut := cli(t, "", "merge", base, extra)
		if code != exitCheck || out != "" || !strings.Contains(errOut, base) || !strings.Contains(errOut, extra) {
			t.Errorf("%s fail = %d %q %q; want both files named", extra, code, out, errOut)
		}
	}
	_, asJSON, _ := cli(t, "", "merge", "--strategy", "override", "--format", "json", base, "testdata/merge/extra.toml")
	// In a directory named as testdata's, for the same policy name.
	file := filepath.Join(t.TempDir(), "merge", "merged.json")
	if err := os.Mkdir(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(asJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, "", "merge", file); code != 0 || out != want {
		t.Errorf("its own json = %d %q\n%s\nwant\n%s", code, errOut, out, want)
	}
	if code, again, _ := cli(t, "", "merge", "--format", "json", file); code != 0 || again != asJSON {
		t.Errorf("json round trip = %d\n%s\nwant\n%s", code, again, asJSON)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules:\n  - name: x\n    priority: high\n    action: allow\n    match: 'true'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, "", "merge", bad); code != exitCheck || !strings.Contains(errOut, "priority") {
		t.Errorf("bad yaml = %d %q", code, errOut)
	}
}
