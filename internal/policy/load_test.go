package policy

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadRepository(t *testing.T) {
	repo, err := Load(os.DirFS("testdata/repo"), LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var names []string
	for _, p := range repo.Policies {
		names = append(names, p.Name)
	}
	// _shared, _drafts and .git-like are never policies; docs has no policy.toml.
	if want := []string{"api", "office"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("policies = %v, want %v", names, want)
	}
	if repo.Get("_shared") != nil || repo.Get("nope") != nil || repo.Get("api") == nil {
		t.Errorf("Get does not find exactly the loaded policies")
	}

	office := repo.Get("office")
	wantSources := []string{"_shared/office.toml", "office/policy.toml", "office/health.toml", "office/tests/basic.toml"}
	if !reflect.DeepEqual(office.Sources, wantSources) {
		t.Errorf("Sources = %v, want %v", office.Sources, wantSources)
	}
	if got, want := ruleNames(office), []string{"health", "block-admin", "office-network"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rules = %v, want %v (priority order)", got, want)
	}
	if office.Group != "intranet" || office.OnError != OnErrorDeny || office.DefaultAction != ActionDeny {
		t.Errorf("settings = %q %q %q", office.Group, office.OnError, office.DefaultAction)
	}
	api := repo.Get("api")
	if api.Group != "default" || api.OnError != OnErrorSkip {
		t.Errorf("api defaults: group %q on_error %q", api.Group, api.OnError)
	}
}

func TestPositions(t *testing.T) {
	p, err := LoadPolicy(os.DirFS("testdata/repo"), "office", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Pos{
		"health":          {"office/health.toml", 1},
		"block-admin":     {"office/policy.toml", 6},
		"office-network":  {"_shared/office.toml", 2},
		"lan-allowed":     {"office/tests/basic.toml", 1},
		"internet-denied": {"office/tests/basic.toml", 7},
	}
	for _, r := range p.Rules {
		if r.Pos != want[r.Name] {
			t.Errorf("rule %s at %v, want %v", r.Name, r.Pos, want[r.Name])
		}
	}
	for _, tc := range p.Tests {
		if tc.Pos != want[tc.Name] {
			t.Errorf("test %s at %v, want %v", tc.Name, tc.Pos, want[tc.Name])
		}
	}
	if tc := p.Tests[0]; tc.Name != "internet-denied" || tc.Rule == nil || *tc.Rule != "" {
		t.Errorf(`rule = "" must give a pointer to ""`)
	}
}

func TestLoadPolicyErrors(t *testing.T) {
	fsys := os.DirFS("testdata/merge")
	tests := []struct {
		dir  string
		want []wantErr
	}{
		{"escape", []wantErr{{"escape/policy.toml", 2, `include "../../outside.toml" escapes the policies root`}}},
		{"missing-include", []wantErr{{"missing-include/policy.toml", 3, "_shared/nope.toml): file does not exist"}}},
		{"unknown-key", []wantErr{
			{"unknown-key/policy.toml", 2, `unknown key "colour"`},
			{"unknown-key/policy.toml", 12, `rule "b": unknown key "prio"`},
			{"unknown-key/policy.toml", 10, `rule "b": priority is required`},
		}},
		{"Bad_Name", []wantErr{{"Bad_Name/policy.toml", 0, `invalid policy name "Bad_Name"`}}},
		{"dup-in-file", []wantErr{{"dup-in-file/policy.toml", 11, `rule "r" is defined twice in this file (first at dup-in-file/policy.toml:4)`}}},
		{"tests-conflict", []wantErr{{"tests-conflict/more.toml", 1, `test "t" is already defined at tests-conflict/policy.toml:3`}}},
		{"no-such-policy", []wantErr{{"no-such-policy/policy.toml", 0, "file does not exist"}}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			p, err := LoadPolicy(fsys, tt.dir, LoadOptions{})
			if p != nil {
				t.Errorf("got a policy along with errors")
			}
			checkErrs(t, err, tt.want)
		})
	}
}

func TestLoadCollectsAllProblems(t *testing.T) {
	repo, err := Load(os.DirFS("testdata/merge"), LoadOptions{})
	l := errList(t, err)
	for _, name := range []string{"escape", "missing-include", "unknown-key", "Bad_Name", "global", "file-fail", "dup-in-file", "tests-conflict"} {
		if len(repo.Invalid[name]) == 0 {
			t.Errorf("policy %s: no problems reported", name)
		}
	}
	for _, name := range []string{"policy-override", "file-level", "include-order"} {
		if repo.Get(name) == nil {
			t.Errorf("valid policy %s missing from the repository", name)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.File == "" {
		t.Errorf("errors.As(*Error) failed on %v", err)
	}
	if strings.Count(l.Error(), "\n")+1 != len(l) {
		t.Errorf("ErrorList.Error must print one problem per line")
	}
}

func TestValueErrors(t *testing.T) {
	const head = "default_action = \"deny\"\n"
	tests := []struct {
		name, src string
		want      wantErr
	}{
		{"syntax", head + "[[rules]\n", wantErr{"p/policy.toml", 2, "invalid TOML"}},
		{"priority type", head + "[[rules]]\nname = \"x\"\npriority = \"high\"\naction = \"allow\"\nmatch = \"true\"\n",
			wantErr{"p/policy.toml", 2, `rule "x": priority must be an integer, not a string`}},
		{"action", head + "[[rules]]\nname = \"x\"\npriority = 1\naction = \"permit\"\nmatch = \"true\"\n",
			wantErr{"p/policy.toml", 2, `rule "x": action must be "allow" or "deny", not "permit"`}},
		{"empty match", head + "[[rules]]\nname = \"x\"\npriority = 1\naction = \"allow\"\nmatch = \"  \"\n",
			wantErr{"p/policy.toml", 2, `rule "x": match must not be empty`}},
		{"no name", head + "\n[[rules]]\npriority = 1\naction = \"allow\"\nmatch = \"true\"\n",
			wantErr{"p/policy.toml", 3, "rule #1: name is required"}},
		{"default_action", "default_action = \"maybe\"\n", wantErr{"p/policy.toml", 1, `default_action must be "allow" or "deny"`}},
		{"no default_action", "group = \"x\"\n", wantErr{"p/policy.toml", 0, "default_action is required"}},
		{"on_error", head + "on_error = 1\n", wantErr{"p/policy.toml", 2, "on_error must be a string, not an integer"}},
		{"merge", head + "merge = \"replace\"\n", wantErr{"p/policy.toml", 2, `merge must be "fail", "override" or "maintain"`}},
		{"rules shape", head + "rules = 3\n", wantErr{"p/policy.toml", 2, "rules must be an array of tables"}},
		{"test request", head + "[[tests]]\nname = \"t\"\nrequest = \"GET /\"\nexpect = \"allow\"\n",
			wantErr{"p/policy.toml", 2, `test "t": request must be a table`}},
		{"nan request", head + "[[tests]]\nname = \"t\"\nrequest = { attributes = { x = nan } }\nexpect = \"allow\"\n",
			wantErr{"p/policy.toml", 2, "request.attributes.x: nan and inf"}},
		{"unknown test rule", head + "[[tests]]\nname = \"t\"\nrequest = {}\nexpect = \"allow\"\nrule = \"nope\"\n",
			wantErr{"p/policy.toml", 2, `test "t": rule "nope" is not defined`}},
		{"include type", head + "include = \"x.toml\"\n", wantErr{"p/policy.toml", 2, "include must be an array of strings"}},
		{"include self", head + "include = [\"policy.toml\"]\n", wantErr{"p/policy.toml", 2, "names policy.toml itself"}},
		{"include abs", head + "include = [\"/etc/x.toml\"]\n", wantErr{"p/policy.toml", 2, "must be a relative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"p/policy.toml": {Data: []byte(tt.src)}}
			_, err := LoadPolicy(fsys, "p", LoadOptions{})
			checkErrs(t, err, []wantErr{tt.want})
		})
	}
}

func TestFragmentMayNotSetPolicyKeys(t *testing.T) {
	fsys := fstest.MapFS{
		"p/policy.toml": {Data: []byte("default_action = \"deny\"\n")},
		"p/extra.toml":  {Data: []byte("# comment\ndefault_action = \"allow\"\n")},
		"p/.swap.toml":  {Data: []byte("not toml at all [")},
		"p/notes.txt":   {Data: []byte("ignored")},
	}
	_, err := LoadPolicy(fsys, "p", LoadOptions{})
	checkErrs(t, err, []wantErr{{"p/extra.toml", 2, `unknown key "default_action" (only policy.toml may set it`}})
	if l := errList(t, err); len(l) != 1 {
		t.Errorf("want only the extra.toml problem, got:\n%v", l)
	}
}

func TestIncludedFragmentIsMergedOnce(t *testing.T) {
	fsys := fstest.MapFS{
		"p/policy.toml": {Data: []byte("default_action = \"deny\"\ninclude = [\"extra.toml\"]\n")},
		"p/extra.toml":  {Data: []byte("[[rules]]\nname = \"a\"\npriority = 1\naction = \"allow\"\nmatch = \"true\"\n")},
	}
	p, err := LoadPolicy(fsys, "p", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"p/extra.toml", "p/policy.toml"}; !reflect.DeepEqual(p.Sources, want) {
		t.Errorf("Sources = %v, want %v", p.Sources, want)
	}
}

func TestBadOptions(t *testing.T) {
	if _, err := Load(os.DirFS("testdata/repo"), LoadOptions{MergeDefault: "merge"}); err == nil {
		t.Error("Load accepted an unknown strategy")
	}
	if _, err := MergeFiles([]SourceFile{{Name: "a.toml"}}, LoadOptions{MergeDefault: "x"}); err == nil {
		t.Error("MergeFiles accepted an unknown strategy")
	}
}

func TestErrorRendering(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "a/policy.toml", Line: 3, Msg: "bad"}, "a/policy.toml:3: bad"},
		{Error{File: "a/policy.toml", Msg: "bad"}, "a/policy.toml: bad"},
		{Error{Msg: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if ErrorList(nil).Err() != nil {
		t.Error("empty ErrorList.Err() must be nil")
	}
}
