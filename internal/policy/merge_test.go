package policy

import (
	"os"
	"path"
	"reflect"
	"strings"
	"testing"
)

// Each directory of testdata/merge is one case; a rule's description names
// the file whose definition won.
func TestMergeStrategies(t *testing.T) {
	tests := []struct {
		name   string
		dir    string
		global Strategy
		want   map[string]string // rule → winning description
		errs   []wantErr
	}{
		// Global level: no merge key anywhere.
		{"global default fails", "global", "", nil, []wantErr{{"global/later.toml", 3, `rule "r" is already defined at global/policy.toml:3`}}},
		{"global fail", "global", StrategyFail, nil, []wantErr{{"global/later.toml", 3, "global/policy.toml:3"}}},
		{"global override", "global", StrategyOverride, map[string]string{"r": "later"}, nil},
		{"global maintain", "global", StrategyMaintain, map[string]string{"r": "policy"}, nil},
		// Policy level beats global.
		{"policy override over global fail", "policy-override", StrategyFail, map[string]string{"r": "later"}, nil},
		{"policy override over global maintain", "policy-override", StrategyMaintain, map[string]string{"r": "later"}, nil},
		{"policy maintain over global override", "policy-maintain", StrategyOverride, map[string]string{"r": "policy"}, nil},
		// File level beats policy level.
		{"file maintain over policy override", "file-level", StrategyFail, map[string]string{"r1": "policy", "r2": "b"}, nil},
		{"file fail over policy override", "file-fail", StrategyOverride, nil, []wantErr{{"file-fail/strict.toml", 3, "file-fail/policy.toml:4"}}},
		// Includes in listed order, then policy.toml, then fragments by path.
		{"include and fragment order", "include-order", "", map[string]string{
			"shared": "one", "only-two": "two", "mine": "a", "order": "tests", "last": "z",
		}, nil},
	}
	fsys := os.DirFS("testdata/merge")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadPolicy(fsys, tt.dir, LoadOptions{MergeDefault: tt.global})
			checkErrs(t, err, tt.errs)
			if tt.errs != nil {
				return
			}
			if got := descriptions(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("winners = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMergeOrderSources(t *testing.T) {
	p, err := LoadPolicy(os.DirFS("testdata/merge"), "include-order", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"_shared/two.toml", "_shared/one.toml", "include-order/policy.toml",
		"include-order/a.toml", "include-order/tests/t.toml", "include-order/z.toml",
	}
	if !reflect.DeepEqual(p.Sources, want) {
		t.Errorf("Sources = %v, want %v", p.Sources, want)
	}
}

// readSources reads testdata files for MergeFiles, named as given.
func readSources(t *testing.T, names ...string) []SourceFile {
	t.Helper()
	var out []SourceFile
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, SourceFile{Name: n, Data: data})
	}
	return out
}

func TestMergeFilesStrategies(t *testing.T) {
	dir := "testdata/merge/"
	tests := []struct {
		name   string
		files  []string
		global Strategy
		want   map[string]string
		errs   []wantErr
	}{
		{"fail names both files", []string{"global/policy.toml", "global/later.toml"}, "", nil,
			[]wantErr{{dir + "global/later.toml", 3, dir + "global/policy.toml:3"}}},
		{"override", []string{"global/policy.toml", "global/later.toml"}, StrategyOverride, map[string]string{"r": "later"}, nil},
		{"maintain", []string{"global/policy.toml", "global/later.toml"}, StrategyMaintain, map[string]string{"r": "policy"}, nil},
		{"order given, not lexical", []string{"global/later.toml", "global/policy.toml"}, StrategyOverride, map[string]string{"r": "policy"}, nil},
		// The first file's merge is the policy's, as policy.toml's is in Load.
		{"first file acts as policy.toml", []string{"file-level/policy.toml", "file-level/a.toml", "file-level/b.toml"}, StrategyFail,
			map[string]string{"r1": "policy", "r2": "b"}, nil},
		{"per-file fail", []string{"file-fail/policy.toml", "file-fail/strict.toml"}, StrategyOverride, nil,
			[]wantErr{{dir + "file-fail/strict.toml", 3, dir + "file-fail/policy.toml:4"}}},
		{"include refused", []string{"include-order/policy.toml"}, "", nil,
			[]wantErr{{dir + "include-order/policy.toml", 3, "merge does not follow includes"}}},
		{"default_action required", []string{"global/later.toml"}, "", nil,
			[]wantErr{{dir + "global/later.toml", 0, "default_action is required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for _, f := range tt.files {
				names = append(names, dir+f)
			}
			p, err := MergeFiles(readSources(t, names...), LoadOptions{MergeDefault: tt.global})
			checkErrs(t, err, tt.errs)
			if tt.errs != nil {
				return
			}
			if got := descriptions(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("winners = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(p.Sources, names) {
				t.Errorf("Sources = %v, want %v", p.Sources, names)
			}
		})
	}
}

func TestMergeFilesPolicyKeys(t *testing.T) {
	a := SourceFile{Name: "a.toml", Data: []byte("default_action = \"deny\"\ngroup = \"web\"\n")}
	same := SourceFile{Name: "same.toml", Data: []byte("group = \"web\"\n")}
	b := SourceFile{Name: "b.toml", Data: []byte("\ndefault_action = \"allow\"\n")}
	bMaintain := SourceFile{Name: "b.toml", Data: []byte("merge = \"maintain\"\ndefault_action = \"allow\"\n")}
	tests := []struct {
		name   string
		files  []SourceFile
		global Strategy
		want   Action
		errs   []wantErr
	}{
		{"fail", []SourceFile{a, b}, "", "", []wantErr{{"b.toml", 2, `default_action "allow" conflicts with "deny" set at a.toml:1`}}},
		{"override", []SourceFile{a, b}, StrategyOverride, ActionAllow, nil},
		{"maintain", []SourceFile{a, b}, StrategyMaintain, ActionDeny, nil},
		{"file maintain over global override", []SourceFile{a, bMaintain}, StrategyOverride, ActionDeny, nil},
		{"same value is no conflict", []SourceFile{a, same}, "", ActionDeny, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := MergeFiles(tt.files, LoadOptions{MergeDefault: tt.global})
			checkErrs(t, err, tt.errs)
			if tt.errs == nil && p.DefaultAction != tt.want {
				t.Errorf("default_action = %q, want %q", p.DefaultAction, tt.want)
			}
		})
	}
}

func TestMergeFilesName(t *testing.T) {
	for file, want := range map[string]string{
		"policies/office/policy.toml": "office",
		"policy.toml":                 "merged",
		"Bad_Name/x.toml":             "merged",
		"/abs/web-app/rules.toml":     "web-app",
	} {
		p, err := MergeFiles([]SourceFile{{Name: file, Data: []byte(`default_action = "deny"`)}}, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != want {
			t.Errorf("%s: name %q, want %q", file, p.Name, want)
		}
	}
	if _, err := MergeFiles(nil, LoadOptions{}); err == nil {
		t.Error("MergeFiles with no files must fail")
	}
}

// MergeFiles over a policy's files in Load's order gives Load's policy.
func TestMergeFilesMatchesLoad(t *testing.T) {
	p, err := LoadPolicy(os.DirFS("testdata/repo"), "office", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var files []SourceFile
	for _, s := range p.Sources {
		data := readSources(t, path.Join("testdata/repo", s))[0].Data
		if s == "office/policy.toml" {
			data = []byte(stripInclude(string(data)))
		}
		files = append(files, SourceFile{Name: s, Data: data})
	}
	m, err := MergeFiles(files, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Name = p.Name // the first file is _shared/…, so MergeFiles says "merged"
	if m.Etag() != p.Etag() {
		t.Errorf("etags differ:\n%s\n%s", m.Canonical(), p.Canonical())
	}
}

// stripInclude drops the include line: MergeFiles takes the files instead.
func stripInclude(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "include") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
