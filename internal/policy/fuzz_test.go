package policy

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/fstest"
	"unicode/utf8"
)

// fuzzSeeds are realistic file pairs; testdata/fuzz holds more.
var fuzzSeeds = [][2]string{
	{
		"default_action = \"deny\"\ninclude = [\"../_shared/office.toml\"]\n\n[[rules]]\nname = \"a\"\npriority = 1\naction = \"allow\"\nmatch = 'request.method == \"GET\"'\n",
		"merge = \"override\"\n[[rules]]\nname = \"a\"\npriority = 2\naction = \"deny\"\nmatch = \"true\"\n",
	},
	{
		"default_action = \"allow\"\non_error = \"skip\"\nrules = [{ name = \"x\", priority = 0, action = \"deny\", match = \"\"\"\nfalse\n\"\"\" }]\n",
		"[[tests]]\nname = \"t\"\nrequest = { time = 2024-01-01T00:00:00Z, attributes = { n = 1.5, l = [1, 2] } }\nexpect = \"allow\"\nrule = \"\"\n",
	},
	{
		// near the nesting budget (docs/security.md), for the fuzzer to push past it
		"default_action = \"deny\"\n[[tests]]\nname = \"t\"\nexpect = \"deny\"\nrequest = { attributes = {a={a={a={a={a={a={a={a={a={a={a={a=[1]}}}}}}}}}}}} }\n",
		"x.a.a.a.a.a.a.a.a.a.a.a.a.a = 1\n[y.b.c]\nz = [[[[[[[[[[[[1]]]]]]]]]]]]\n",
	},
}

// checkFuzzResult holds every outcome to the package's promises: problems
// name their file, and a policy that loads survives MarshalTOML and Load
// with the same etag.
func checkFuzzResult(t *testing.T, p *Policy, err error) {
	if err != nil {
		var l ErrorList
		if !errors.As(err, &l) || len(l) == 0 {
			t.Fatalf("error is not a non-empty ErrorList: %v", err)
		}
		for _, e := range l {
			if e.File == "" || e.Line < 0 || e.Msg == "" {
				t.Fatalf("problem without a place: %#v", e)
			}
		}
		return
	}
	for _, r := range p.Rules {
		if r.Pos.File == "" {
			t.Fatalf("rule %q has no file", r.Name)
		}
	}
	checkRoundTrip(t, p)
}

// checkRoundTrip loads MarshalTOML's output back and compares etags.
func checkRoundTrip(t *testing.T, p *Policy) {
	data, err := p.MarshalTOML()
	if err != nil {
		t.Fatalf("MarshalTOML: %v", err)
	}
	back, err := LoadPolicy(fstest.MapFS{p.Name + "/policy.toml": {Data: data}}, p.Name, LoadOptions{})
	if err != nil {
		t.Fatalf("MarshalTOML output does not load: %v\n%s", err, data)
	}
	if back.Etag() != p.Etag() {
		t.Fatalf("round trip changed the policy:\n%s\n%s", p.Canonical(), back.Canonical())
	}
}

func FuzzLoadPolicy(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	shared := []byte("[[rules]]\nname = \"office\"\npriority = 100\naction = \"allow\"\nmatch = \"true\"\n")
	f.Fuzz(func(t *testing.T, policy, fragment []byte) {
		fsys := fstest.MapFS{
			"p/policy.toml":       {Data: policy},
			"p/tests/frag.toml":   {Data: fragment},
			"_shared/office.toml": {Data: shared},
		}
		p, err := LoadPolicy(fsys, "p", LoadOptions{})
		checkFuzzResult(t, p, err)
	})
}

func FuzzMergeFiles(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s[0]), []byte(s[1]), uint8(0))
	}
	strategies := []Strategy{"", StrategyFail, StrategyOverride, StrategyMaintain}
	f.Fuzz(func(t *testing.T, a, b []byte, strategy uint8) {
		files := []SourceFile{{Name: "p/a.toml", Data: a}, {Name: "p/b.toml", Data: b}}
		opts := LoadOptions{MergeDefault: strategies[int(strategy)%len(strategies)]}
		p, err := MergeFiles(files, opts)
		if err == nil && p.Name != "p" {
			t.Fatalf("name %q, want p", p.Name)
		}
		checkFuzzResult(t, p, err)
	})
}

// FuzzMarshalTOML builds loadable policies from arbitrary strings and
// numbers, since random bytes rarely make a valid policy.toml: whatever
// MarshalTOML writes must load back to the same etag.
func FuzzMarshalTOML(f *testing.F) {
	f.Add("allow-get", int64(10), `request.method == "GET"`, "  Crawlers ''' \"\"\" \\ ", "user-agent", "bot\n", 1.5)
	f.Add("x y", int64(-1), "a\r\nb\t'", "", "", "\x7f", -0.0)
	f.Fuzz(func(t *testing.T, name string, prio int64, match, desc, key, val string, num float64) {
		match, desc = strings.TrimSpace(match), strings.TrimSpace(desc)
		if name == "" || match == "" || math.IsNaN(num) || math.IsInf(num, 0) || !allUTF8(name, match, desc, key, val) {
			t.Skip("not a policy Load could produce")
		}
		p := &Policy{
			Name: "p", Description: desc, DefaultAction: ActionAllow, Group: "default", OnError: OnErrorDeny,
			Rules: []Rule{{Name: name, Priority: prio, Action: ActionDeny, Match: match, Description: desc}},
			Tests: []Test{{Name: name, Expect: ActionAllow, Rule: &name, Request: map[string]any{
				key: val, "n": num, "nested": map[string]any{key: []any{val, num, prio}},
			}}},
		}
		checkRoundTrip(t, p)
	})
}

// allUTF8 checks each string on its own: pieces of a rune split across two
// strings are valid together and invalid apart.
func allUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// FuzzLoadGroup: loading one group (a node's loader) agrees with loading
// everything (the leader): a policy of that group loads to the same etag,
// and a policy left out is named with the group the full load gives it.
func FuzzLoadGroup(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Add([]byte("group = \"edge\"\ndefault_action = \"deny\"\n"), []byte(""))
	f.Fuzz(func(t *testing.T, policy, fragment []byte) {
		fsys := fstest.MapFS{"p/policy.toml": {Data: policy}, "p/more.toml": {Data: fragment}}
		all, _ := Load(fsys, LoadOptions{})
		edge, _ := Load(fsys, LoadOptions{Group: "edge"})
		full, one := all.Get("p"), edge.Get("p")
		switch {
		case one != nil && one.Group != "edge":
			t.Fatalf("loaded a policy of group %q as edge", one.Group)
		case full != nil && full.Group == "edge" && (one == nil || one.Etag() != full.Etag()):
			t.Fatalf("an edge policy did not load the same for group edge: %+v", one)
		case full != nil && full.Group != "edge" && edge.Elsewhere["p"] != full.Group:
			t.Fatalf("a %q policy left out as %q", full.Group, edge.Elsewhere["p"])
		}
	})
}

// FuzzMergeJSONYAML: merge's JSON and YAML readers never panic and give a
// policy or errors, never both, as the TOML reader does.
func FuzzMergeJSONYAML(f *testing.F) {
	f.Add([]byte(`{"rules":[{"name":"a","priority":1,"action":"allow","match":"true"}]}`), true)
	f.Add([]byte("rules:\n  - name: a\n    priority: 1\n    action: allow\n    match: 'true'\n"), false)
	f.Add([]byte("a: &x [*x, *x]\n"), false)
	f.Add([]byte(`{"priority": 1e400, "rules": [1, {"x": null}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "p/a.yaml"
		if asJSON {
			name = "p/a.json"
		}
		p, err := MergeFiles([]SourceFile{{Name: name, Data: data}}, LoadOptions{})
		checkFuzzResult(t, p, err)
	})
}
