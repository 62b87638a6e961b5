package policy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

func loadLayout(t *testing.T, root string) *Policy {
	t.Helper()
	p, err := LoadPolicy(os.DirFS(root), "webapp", LoadOptions{})
	if err != nil {
		t.Fatalf("%s: %v", root, err)
	}
	return p
}

// testdata/layouts/one and …/split hold the same policy: one file against
// an include, fragments and tests/, with other quoting, multi-line strings,
// key order, comments, number syntax, datetime offsets and table styles.
func TestEtagIgnoresLayoutAndFormatting(t *testing.T) {
	one := loadLayout(t, "testdata/layouts/one")
	split := loadLayout(t, "testdata/layouts/split")
	if len(split.Sources) != 4 {
		t.Fatalf("split layout merged %v", split.Sources)
	}
	if one.Etag() != split.Etag() {
		t.Errorf("etags differ:\none:   %s\nsplit: %s", one.Canonical(), split.Canonical())
	}
}

func TestEtagChangesWithContent(t *testing.T) {
	base, err := os.ReadFile("testdata/layouts/one/webapp/policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	etag := func(src string) string {
		t.Helper()
		p, err := LoadPolicy(fstest.MapFS{"webapp/policy.toml": {Data: []byte(src)}}, "webapp", LoadOptions{})
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		return p.Etag()
	}
	want := etag(string(base))
	changes := []struct{ name, old, new string }{
		{"policy description", `"Public web application."`, `"Public web app."`},
		{"default_action", `default_action = "deny"`, `default_action = "allow"`},
		{"group", `group = "web"`, `group = "www"`},
		{"on_error", `on_error = "deny"`, `on_error = "skip"`},
		{"rule name", `name = "office"`, `name = "office-lan"`},
		{"priority", `priority = 50`, `priority = 51`},
		{"action", "action = \"deny\"\nmatch = 'request.headers", "action = \"allow\"\nmatch = 'request.headers"},
		{"match", `"10.0.0.0/8"`, `"10.0.0.0/9"`},
		{"match inner whitespace", `request.method == "GET"`, `request.method  == "GET"`},
		{"rule description", `"Crawlers are not welcome."`, `"Crawlers are welcome."`},
		{"added rule description", "priority = 100\n", "priority = 100\ndescription = \"x\"\n"},
		{"test name", `name = "bot-denied"`, `name = "bots-denied"`},
		{"test expect", "expect = \"allow\"", "expect = \"deny\""},
		{"test rule", `rule = "block-bots"`, `rule = ""`},
		{"test rule dropped", "rule = \"block-bots\"\n", ""},
		{"request string", `"googlebot"`, `"bingbot"`},
		{"request int", `retries = 3`, `retries = 4`},
		{"request int to string", `retries = 3`, `retries = "3"`},
		{"request time", `12:00:00Z`, `12:00:01Z`},
		{"request key", `path = "/"`, `paths = "/"`},
		{"added rule", "[[tests]]\nname = \"get", "[[rules]]\nname = \"n\"\npriority = 1\naction = \"deny\"\nmatch = \"false\"\n\n[[tests]]\nname = \"get"},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(string(base), c.old) {
				t.Fatalf("base policy has no %q", c.old)
			}
			if got := etag(strings.Replace(string(base), c.old, c.new, 1)); got == want {
				t.Errorf("etag unchanged")
			}
		})
	}
}

// MarshalTOML output loads back as the same policy.
func TestMarshalTOMLRoundTrip(t *testing.T) {
	repo, err := Load(os.DirFS("testdata/repo"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policies := append(repo.Policies, loadLayout(t, "testdata/layouts/split"), &Policy{
		Name: "odd", DefaultAction: ActionAllow, Group: "g", OnError: OnErrorAllow,
		Description: "tab\there \"quoted\" \\ back\nand a second line with ''' and \"\"\"",
		Rules:       []Rule{{Name: "weird name", Priority: -3, Action: ActionDeny, Match: "a\n\"\"\"\nb\\"}},
		Tests: []Test{{Name: "t", Expect: ActionDeny, Request: map[string]any{
			"": "empty key", "a.b": 1.0, "big": 1e300, "neg": -0.25, "list": []any{int64(1), "x", []any{}}, "nested": map[string]any{"k k": true},
		}}},
	})
	for _, p := range policies {
		t.Run(p.Name, func(t *testing.T) {
			data, err := p.MarshalTOML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := LoadPolicy(fstest.MapFS{p.Name + "/policy.toml": {Data: data}}, p.Name, LoadOptions{})
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if back.Etag() != p.Etag() {
				t.Errorf("etag changed:\n%s\n%s\n%s", data, p.Canonical(), back.Canonical())
			}
			again, _ := back.MarshalTOML()
			if string(again) != string(data) {
				t.Errorf("MarshalTOML is not stable:\n%s\n%s", data, again)
			}
		})
	}
}

func TestJSONUsesTOMLKeys(t *testing.T) {
	p := loadLayout(t, "testdata/layouts/one")
	var doc map[string]any
	if err := json.Unmarshal(p.Canonical(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "description", "default_action", "group", "on_error", "rules", "tests"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("canonical JSON lacks %q: %s", k, p.Canonical())
		}
	}
	if strings.Contains(string(p.Canonical()), `\u0026`) {
		t.Errorf("canonical JSON escapes &&: %s", p.Canonical())
	}
	req := p.Tests[1].Request // get-allowed
	if req["time"] != "2024-05-01T12:00:00Z" {
		t.Errorf("offset datetime normalised to %v", req["time"])
	}
}

func TestRequestDatetimes(t *testing.T) {
	src := "default_action = \"deny\"\n[[tests]]\nname = \"t\"\nexpect = \"deny\"\n" +
		"request = { a = 2024-05-01T14:00:00.5+02:00, b = 2024-05-01T14:00:00, c = 2024-05-01, d = 07:30:00 }\n"
	p, err := LoadPolicy(fstest.MapFS{"p/policy.toml": {Data: []byte(src)}}, "p", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "2024-05-01T12:00:00.5Z", "b": "2024-05-01T14:00:00", "c": "2024-05-01", "d": "07:30:00"}
	for k, v := range want {
		if got := p.Tests[0].Request[k]; got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
}

// A hand-built policy in any order has the etag of the sorted one, and
// Canonical leaves it as it was.
func TestCanonicalSortsCopy(t *testing.T) {
	p := &Policy{Name: "p", DefaultAction: ActionDeny, Group: "default", OnError: OnErrorDeny, Rules: []Rule{
		{Name: "b", Priority: 1, Action: ActionAllow, Match: "true"},
		{Name: "a", Priority: 2, Action: ActionAllow, Match: "true"},
		{Name: "a0", Priority: 1, Action: ActionAllow, Match: "true"},
	}}
	sorted := &Policy{Name: "p", DefaultAction: ActionDeny, Group: "default", OnError: OnErrorDeny,
		Rules: []Rule{p.Rules[2], p.Rules[0], p.Rules[1]}}
	if p.Etag() != sorted.Etag() {
		t.Error("etag depends on rule order")
	}
	if p.Rules[0].Name != "b" {
		t.Error("Canonical reordered the caller's rules")
	}
	empty := &Policy{Name: "p", DefaultAction: ActionDeny}
	if !strings.Contains(string(empty.Canonical()), `"rules":[]`) {
		t.Errorf("no rules must read as []: %s", empty.Canonical())
	}
}
