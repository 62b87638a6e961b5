package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/policyrollout/reconciler/internal/policy"
)

// caseFile is a data-driven test (testdata/cases/*.toml): a policy, and
// requests with the decision each must get.
type caseFile struct {
	Policy policy.Policy
	Cases  []struct {
		Name     string
		Request  map[string]any
		Decision Verdict
		Rule     string
		Error    string // a substring of Decision.Error; "" means no error
		// RawSourceIP replaces source_ip after decoding, for addresses
		// DecodeRequest would refuse but Go callers may still pass.
		RawSourceIP string `toml:"raw_source_ip"`
	}
}

func TestCases(t *testing.T) {
	files, err := filepath.Glob("testdata/cases/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files: %v", err)
	}
	for _, file := range files {
		var cf caseFile
		if _, err := toml.DecodeFile(file, &cf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, disable := range []bool{false, true} {
			cp := mustCompile(t, &cf.Policy, Options{DisableIndex: disable})
			for _, c := range cf.Cases {
				req, err := RequestFromMap(c.Request)
				if err != nil {
					t.Fatalf("%s: %s: %v", file, c.Name, err)
				}
				if c.RawSourceIP != "" {
					req.SourceIP = c.RawSourceIP
				}
				got := cp.Evaluate(req)
				if got.Verdict != c.Decision || got.Rule != c.Rule || !errorMatches(got.Error, c.Error) {
					t.Errorf("%s: %s (index disabled %v): got %+v, want %s by %q with error %q",
						filepath.Base(file), c.Name, disable, got, c.Decision, c.Rule, c.Error)
				}
			}
		}
	}
}

func errorMatches(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.Contains(got, want)
}

func TestDecisionFields(t *testing.T) {
	p := testPolicy("deny", "deny", rule("get", 1, "allow", `request.method == 'GET'`))
	cp := mustCompile(t, p, DefaultOptions())
	d := cp.Evaluate(&Request{Method: "GET"})
	want := Decision{Verdict: Allow, Rule: "get", Policy: "policies/p", Etag: p.Etag()}
	if d != want {
		t.Errorf("got %+v, want %+v", d, want)
	}
	if d := cp.Evaluate(&Request{}); d.Verdict != Deny || d.Rule != "" {
		t.Errorf("default: got %+v", d)
	}
	if cp.Name() != "p" || cp.Etag() != p.Etag() || cp.Source() != p {
		t.Errorf("accessors: %q %q %p", cp.Name(), cp.Etag(), cp.Source())
	}
}

// compileErrors compiles p and returns the policy errors, failing if there
// are none or the error is not a policy.ErrorList.
func compileErrors(t *testing.T, p *policy.Policy) policy.ErrorList {
	t.Helper()
	_, err := Compile(p, DefaultOptions())
	var list policy.ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("Compile error %v (%T), want a policy.ErrorList", err, err)
	}
	return list
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name, match, want string
	}{
		{"typo", `request.pth == '/'`, `undefined field 'pth'`},
		{"not bool", `request.method`, `must be a bool expression, not string`},
		{"dyn", `request.attributes.admin`, `must be a bool expression, not dyn`},
		{"syntax", `request.method ==`, `match: 1:`},
		{"unknown function", `request.method.shout()`, `undeclared reference to 'shout'`},
		{"bad cidr literal", `inIpRange(request.source_ip, '10.0.0.0/33')`, `invalid range "10.0.0.0/33"`},
		{"bad cidr() literal", `cidr('10.0.0.0/33').containsIP(request.source_ip)`, `invalid cidr argument`},
		{"bad regex", `request.path.matches('[')`, `missing closing ]`},
		{"regex not literal", `request.path.matches(request.host)`, `must be a string literal`},
		{"empty", `  `, `match must not be empty`},
		{"triple nesting", `request.groups.all(a, request.groups.all(b, request.groups.all(c, a == b)))`,
			`comprehension exceeds nesting limit`},
	}
	for _, tc := range cases {
		list := compileErrors(t, testPolicy("allow", "deny", rule("r-"+tc.name, 3, "deny", tc.match)))
		e := list[0]
		if e.File != "p/policy.toml" || e.Line != 30 || e.Rule != "r-"+tc.name {
			t.Errorf("%s: error at %s:%d rule %q", tc.name, e.File, e.Line, e.Rule)
		}
		msg := e.Error()
		if !strings.HasPrefix(msg, `p/policy.toml:30: rule "r-`+tc.name+`": `) || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q, want it to contain %q", tc.name, msg, tc.want)
		}
	}
}

func TestCompileCollectsAllErrors(t *testing.T) {
	p := testPolicy("maybe", "sometimes",
		rule("ok", 1, "allow", `true`),
		rule("bad-1", 2, "allow", `request.pth == 'x'`),
		rule("bad-2", 3, "deny", `1`),
		rule("bad-3", 4, "block", `true`),
		rule("ok", 5, "allow", `true`),
	)
	list := compileErrors(t, p)
	text := list.Error()
	for _, want := range []string{"default_action", "on_error", `"bad-1"`, `"bad-2"`, `"bad-3"`, `"ok": is defined twice`} {
		if !strings.Contains(text, want) {
			t.Errorf("errors do not mention %s:\n%s", want, text)
		}
	}
	if len(list) != 6 {
		t.Errorf("got %d errors, want 6:\n%s", len(list), text)
	}
}

func TestCostBudget(t *testing.T) {
	cases := []struct{ name, match string }{
		{"nested comprehensions", `request.groups.all(a, request.groups.all(b, a.contains(b)))`},
		{"quadratic string scans", `request.headers.all(k, request.headers.all(j, request.headers[k].contains(request.headers[j])))`},
	}
	for _, tc := range cases {
		list := compileErrors(t, testPolicy("allow", "deny", rule("costly", 7, "deny", tc.match)))
		msg := list[0].Error()
		if !strings.HasPrefix(msg, `p/policy.toml:70: rule "costly": `) || !strings.Contains(msg, "exceeds the budget of 100000") {
			t.Errorf("%s: %s", tc.name, msg)
		}
	}
	huge := `request.path.matches('` + strings.Repeat("a", MaxRegexLength+1) + `')`
	msg := compileErrors(t, testPolicy("allow", "deny", rule("huge-regex", 1, "deny", huge)))[0].Error()
	if !strings.Contains(msg, `rule "huge-regex"`) || !strings.Contains(msg, "longer than the limit of 1024") {
		t.Errorf("huge regex: %s", msg)
	}
	// Within the default budget, but not a tighter one.
	p := testPolicy("allow", "deny", rule("scan", 1, "deny", `request.path.matches('^/a+b')`))
	if _, err := Compile(p, Options{MaxRuleCost: 100}); err == nil || !strings.Contains(err.Error(), "budget of 100") {
		t.Errorf("MaxRuleCost option ignored: %v", err)
	}
}

func TestRuntimeCostLimit(t *testing.T) {
	// Cheap to estimate with the assumed sizes, costly with a huge list:
	// the run-time limit makes it an error, and on_error applies.
	match := `request.groups.exists(g, g == 'nobody') || request.method == 'GET'`
	big := &Request{Method: "GET", Groups: make([]string, 100_000)}
	for _, onError := range []policy.OnError{policy.OnErrorDeny, policy.OnErrorAllow, policy.OnErrorSkip} {
		for _, disable := range []bool{false, true} {
			p := testPolicy("deny", onError, rule("loop", 1, "allow", match))
			cp := mustCompile(t, p, Options{RuntimeCostLimit: 10_000, DisableIndex: disable})
			d := cp.Evaluate(big)
			if !strings.Contains(d.Error, "cost limit exceeded") {
				t.Fatalf("%s: got %+v, want a cost limit error", onError, d)
			}
			wantRule, wantVerdict := "loop", map[policy.OnError]Verdict{"deny": Deny, "allow": Allow, "skip": Deny}[onError]
			if onError == policy.OnErrorSkip {
				wantRule = ""
			}
			if d.Verdict != wantVerdict || d.Rule != wantRule {
				t.Errorf("%s: got %+v", onError, d)
			}
			if d := cp.Evaluate(&Request{Method: "GET", Groups: []string{"a"}}); d.Verdict != Allow || d.Error != "" {
				t.Errorf("%s: small request: %+v", onError, d)
			}
		}
	}
}

func TestOnErrorModes(t *testing.T) {
	rules := []policy.Rule{
		rule("needs-header", 1, "allow", `request.headers['x-token'] == 'secret'`),
		rule("admins", 2, "allow", `'admin' in request.groups`),
	}
	cases := []struct {
		onError policy.OnError
		groups  []string
		want    Decision
	}{
		{"deny", nil, Decision{Verdict: Deny, Rule: "needs-header"}},
		{"allow", nil, Decision{Verdict: Allow, Rule: "needs-header"}},
		{"skip", nil, Decision{Verdict: Deny, Rule: ""}},
		{"skip", []string{"admin"}, Decision{Verdict: Allow, Rule: "admins"}},
		{"", nil, Decision{Verdict: Deny, Rule: "needs-header"}}, // default: deny
	}
	for _, tc := range cases {
		cp := mustCompile(t, testPolicy("deny", tc.onError, rules...), DefaultOptions())
		d := cp.Evaluate(&Request{Groups: tc.groups})
		if d.Verdict != tc.want.Verdict || d.Rule != tc.want.Rule {
			t.Errorf("on_error %q: got %+v, want %s by %q", tc.onError, d, tc.want.Verdict, tc.want.Rule)
		}
		if want := `rule "needs-header": no such key: x-token`; d.Error != want {
			t.Errorf("on_error %q: error %q, want %q", tc.onError, d.Error, want)
		}
	}
}

func TestSourceIsNotModified(t *testing.T) {
	p := testPolicy("allow", "deny",
		rule("z", 1, "deny", `request.method == 'A'`), rule("a", 1, "deny", `request.method == 'A'`))
	before := string(p.Canonical())
	cp := mustCompile(t, p, DefaultOptions())
	if d := cp.Evaluate(&Request{Method: "A"}); d.Rule != "a" {
		t.Errorf("tie by name: got %q", d.Rule)
	}
	if string(p.Canonical()) != before || p.Rules[0].Name != "z" {
		t.Error("Compile modified the policy")
	}
}

// TestDocExamples compiles every rule of the TOML examples in
// docs/policy-language.md, so the documentation cannot drift from the
// language.
func TestDocExamples(t *testing.T) {
	data, err := os.ReadFile("../../docs/policy-language.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```toml\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("no toml examples in the docs")
	}
	for _, block := range blocks {
		block, _, _ = strings.Cut(block, "```")
		var frag struct{ Rules []policy.Rule }
		if _, err := toml.Decode(block, &frag); err != nil {
			t.Fatalf("example does not parse: %v\n%s", err, block)
		}
		p := testPolicy("allow", "deny", frag.Rules...)
		if _, err := Compile(p, DefaultOptions()); err != nil {
			t.Errorf("doc example: %v", err)
		}
	}
}
