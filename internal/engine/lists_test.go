package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/policy"
)

// listTree is a policies root with one policy whose rules are given, and
// the given list files.
func listTree(rules string, files map[string]string) map[string][]byte {
	out := map[string][]byte{"edge/policy.toml": []byte("default_action = \"allow\"\n" + rules)}
	for name, data := range files {
		out[name] = []byte(data)
	}
	return out
}

func denyRule(name, match string) string {
	return fmt.Sprintf("[[rules]]\nname = %q\npriority = 10\naction = \"deny\"\nmatch = %q\n", name, match)
}

func TestInIPListMatchesInsideCIDRs(t *testing.T) {
	tree := listTree(denyRule("tor", "inIpList(request.source_ip, 'tor-exit')"), map[string]string{
		"_lists/tor-exit.netset": "# FireHOL style\n\n10.0.0.0/8\n192.0.2.7\n2001:db8::/32\n",
	})
	b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	for ip, want := range map[string]Verdict{"10.1.2.3": Deny, "192.0.2.7": Deny, "192.0.2.8": Allow,
		"2001:db8::1": Deny, "2001:db9::1": Allow, "::ffff:10.0.0.1": Deny, "not-an-ip": Allow} {
		d, err := b.Evaluate("edge", &Request{SourceIP: ip})
		if err != nil || d.Verdict != want {
			t.Errorf("%s: got %v %v, want %s", ip, d.Verdict, err, want)
		}
	}
}

// The language before lists: a CIDR in a list literal is compared as a
// string and never matches an address inside it; inIpList does.
func TestStringListOfCIDRsNeverMatchesButIPListDoes(t *testing.T) {
	tree := listTree(denyRule("in", "request.source_ip in ['10.0.0.0/8']")+denyRule("list", "inIpList(request.source_ip, 'block')"),
		map[string]string{"_lists/block.netset": "10.0.0.0/8\n"})
	b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	d, _ := b.Evaluate("edge", &Request{SourceIP: "10.9.9.9"})
	if d.Verdict != Deny || d.Rule != "list" {
		t.Fatalf("got %+v, want deny by rule list", d)
	}
}

func TestInListIsExactAndCaseSensitive(t *testing.T) {
	tree := listTree(denyRule("hosts", "inList(request.host, 'blocked-hosts')"), map[string]string{
		"_lists/blocked-hosts.txt": "# hosts\nevil.example\n\nbad.example\n",
	})
	b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	for host, want := range map[string]Verdict{"evil.example": Deny, "bad.example": Deny, "EVIL.example": Allow, "evil.example.com": Allow} {
		if d, _ := b.Evaluate("edge", &Request{Host: host}); d.Verdict != want {
			t.Errorf("%s: got %s, want %s", host, d.Verdict, want)
		}
	}
}

func TestListCallsCheckedAtCompileTime(t *testing.T) {
	files := map[string]string{"_lists/ips.netset": "10.0.0.0/8\n", "_lists/hosts.txt": "a\n"}
	for match, want := range map[string]string{
		"inIpList(request.source_ip, 'nope')":        `unknown list "nope"`,
		"inIpList(request.source_ip, 'hosts')":       `list "hosts" is a string list; use inList`,
		"inList(request.host, 'ips')":                `list "ips" is an IP list; use inIpList`,
		"inList(request.host, request.path)":         "must be a string literal",
		"inIpList(request.source_ip, 'ips') && true": "",
	} {
		_, errs := CompileTree(listTree(denyRule("r1", match), files), policy.LoadOptions{}, DefaultOptions())
		got := ""
		if errs != nil {
			got = errs.Error()
		}
		if want == "" && got != "" || want != "" && (!strings.Contains(got, want) || !strings.Contains(got, `rule "r1"`)) {
			t.Errorf("%s: got %q, want it to name rule r1 and say %q", match, got, want)
		}
	}
}

// A list test at the top of a match guards the rule: a request outside
// the list does not evaluate it. Decisions are those of the match alone.
func TestListGuardsDecideAsTheMatch(t *testing.T) {
	tree := listTree(denyRule("a", "inIpList(request.source_ip, 'ips') && request.headers['x'] == 'y'")+
		denyRule("b", "!inIpList(request.source_ip, 'ips') && inList(request.host, 'hosts')")+
		denyRule("c", "inList(request.host, 'hosts') || request.path == '/z'"),
		map[string]string{"_lists/ips.netset": "10.0.0.0/8\n::/0\n", "_lists/hosts.txt": "h.example\n"})
	b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	cp, _ := b.Policy("edge")
	guards := map[string]int{}
	for _, r := range cp.rules {
		guards[r.name] = len(r.guards)
	}
	if guards["a"] != 1 || guards["b"] != 1 || guards["c"] != 0 {
		t.Fatalf("guards = %v", guards)
	}
	unguarded := *cp
	unguarded.rules = slices.Clone(cp.rules)
	for i := range unguarded.rules {
		unguarded.rules[i].guards = nil
	}
	for _, ip := range []string{"10.1.1.1", "11.1.1.1", "2001:db8::1", "bogus"} {
		for _, host := range []string{"h.example", "other"} {
			for _, hdr := range []map[string]string{nil, {"x": "y"}} {
				req := &Request{SourceIP: ip, Host: host, Path: "/", Headers: PairsOf(hdr)}
				if got, want := cp.Evaluate(req), unguarded.Evaluate(req); got != want {
					t.Errorf("%+v: guarded %+v, unguarded %+v", req, got, want)
				}
			}
		}
	}
}

// An experiment's policy as the raft log carries it (JSON: no list data)
// compiles beside the live policy with the live lists.
func TestPolicyFromJSONUsesTheLiveLists(t *testing.T) {
	tree := listTree(denyRule("tor", "inIpList(request.source_ip, 'tor-exit')"), map[string]string{"_lists/tor-exit.netset": "10.0.0.0/8\n"})
	b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	live, _ := b.Policy("edge")
	exp := *live.Source()
	exp.Lists = nil
	exp.Rules = append(slices.Clone(exp.Rules), policy.Rule{Name: "more", Priority: 20, Action: policy.ActionDeny, Match: "request.path == '/x'"})
	cp, err := CompileBeside(&exp, DefaultOptions(), live)
	if err != nil {
		t.Fatal(err)
	}
	if d := cp.Evaluate(&Request{SourceIP: "10.2.3.4"}); d.Verdict != Deny || d.Rule != "tor" {
		t.Fatalf("got %+v", d)
	}
}

// A policy decoded from JSON keeps its lists' hashes (and so its etag)
// and compiles beside a live policy holding the same content; a list the
// node does not hold is an error, not an empty list.
func TestPolicyJSONCarriesListHashes(t *testing.T) {
	tree := listTree(denyRule("tor", "inIpList(request.source_ip, 'tor-exit')"), map[string]string{"_lists/tor-exit.netset": "10.0.0.0/8\n"})
	b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	live, _ := b.Policy("edge")
	data, err := json.Marshal(live.Source())
	if err != nil {
		t.Fatal(err)
	}
	var back policy.Policy
	if err := json.Unmarshal(data, &back); err != nil || back.Etag() != live.Etag() {
		t.Fatalf("decoded etag %s, want %s (%v)", back.Etag(), live.Etag(), err)
	}
	cp, err := CompileBeside(&back, DefaultOptions(), live)
	if err != nil || cp.Etag() != live.Etag() {
		t.Fatalf("CompileBeside: %v", err)
	}
	if d := cp.Evaluate(&Request{SourceIP: "10.2.3.4"}); d.Verdict != Deny {
		t.Fatalf("got %+v", d)
	}
	back.Lists["tor-exit"].Hash = strings.Repeat("0", 64)
	if _, err := CompileBeside(&back, DefaultOptions(), live); err == nil || !strings.Contains(err.Error(), "not on this node") {
		t.Fatalf("a list the node lacks: %v", err)
	}
}

// An experiment that changes only a list's content (the same rule text)
// decides as its own list says in a DeltaSet beside the live policy: the
// rule is not the live rule's twin. Twins are found by the list's name in
// the rule's text, so a name must be written as it is: r'…' and "…" are,
// a name spelt with escapes is refused.
func TestDeltaOfAListChange(t *testing.T) {
	for _, name := range []string{`'tor-exit'`, `"tor-exit"`, `r'tor-exit'`} {
		t.Run(name, func(t *testing.T) { testDeltaOfAListChange(t, name) })
	}
	// Spelt with escapes, the name is refused with a message that says how
	// to write it (it was "unknown list", the list file being there).
	for _, name := range []string{`'tor\x2dexit'`, `"tor\u002dexit"`, `'\164or-exit'`} {
		tree := listTree(denyRule("tor", "inIpList(request.source_ip, "+name+")"), map[string]string{"_lists/tor-exit.netset": "10.0.0.0/8\n"})
		if _, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions()); errs == nil || !strings.Contains(errs.Error(), "without escapes") {
			t.Errorf("%s: %v, want the name refused for its escapes", name, errs)
		}
	}
}

func testDeltaOfAListChange(t *testing.T, name string) {
	rule := denyRule("tor", "inIpList(request.source_ip, "+name+") || request.path == '/x'")
	other := denyRule("other", "inList(request.host, 'hosts')")
	lists := func(ips string) map[string]string {
		return map[string]string{"_lists/tor-exit.netset": ips, "_lists/hosts.txt": "a.example\n"}
	}
	compile := func(ips string) *CompiledPolicy {
		b, errs := CompileTree(listTree(rule+other, lists(ips)), policy.LoadOptions{}, DefaultOptions())
		if errs != nil {
			t.Fatal(errs)
		}
		cp, _ := b.Policy("edge")
		return cp
	}
	live, exp := compile("10.0.0.0/8\n"), compile("10.0.0.0/8\n192.0.2.0/24\n")
	set := NewDeltaSet(live, []*CompiledPolicy{exp})
	for _, req := range []*Request{{SourceIP: "192.0.2.7"}, {SourceIP: "10.1.1.1"}, {SourceIP: "198.51.100.1"}, {Host: "a.example"}} {
		base := live.Evaluate(req)
		got := set.Evaluate(req, base, nil)[0]
		if want := exp.Evaluate(req); got.Verdict != want.Verdict || got.Rule != want.Rule {
			t.Errorf("%+v: delta %s %q, experiment alone %s %q", req, got.Verdict, got.Rule, want.Verdict, want.Rule)
		}
	}
}

// An experiment's list the node holds no compiled copy of is compiled
// from what Options.FindList finds (a node's preview: the chunks sent with
// the experiment), checked against its hash.
func TestFindListSuppliesAnExperimentsList(t *testing.T) {
	t.Parallel()
	// A list no other test compiles, so no cached copy answers.
	changed := "10.0.0.0/8\n198.18.77.0/24\n"
	sum := sha256.Sum256([]byte(changed))
	hash := hex.EncodeToString(sum[:])
	exp := &policy.Policy{Name: "edge", DefaultAction: policy.ActionAllow, Rules: []policy.Rule{{Name: "tor", Priority: 10,
		Action: policy.ActionDeny, Match: "inIpList(request.source_ip, 'tor-exit')"}},
		Lists: policy.Lists{"tor-exit": {Name: "tor-exit", File: "_lists/tor-exit.netset", Kind: policy.ListIP, Hash: hash, Entries: 2}}}
	opts := DefaultOptions()
	opts.FindList = &ListFinder{Find: func(l *policy.List) []byte {
		if l.Hash == hash {
			return []byte("10.0.0.0/8\n198.18.0.0/24\n") // not the content of hash
		}
		return nil
	}}
	if _, err := CompileBeside(exp, opts, nil); err == nil || !strings.Contains(err.Error(), "not the content") {
		t.Fatalf("data of another content: %v", err)
	}
	opts.FindList = &ListFinder{Find: func(l *policy.List) []byte {
		if l.Hash == hash {
			return []byte(changed)
		}
		return nil
	}}
	cp, err := CompileBeside(exp, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cp.Evaluate(&Request{SourceIP: "198.18.77.9"}); d.Verdict != Deny {
		t.Fatalf("got %+v", d)
	}
	// The policy's list carries no data; eval's explanation reads the text
	// found for it.
	if m := cp.ListMatches(&Request{SourceIP: "198.18.77.9"}); len(m) != 1 || m[0].Entry != "198.18.77.0/24" || m[0].Line != 2 {
		t.Errorf("list matches %+v", m)
	}
}

// A list call whose first argument holds commas or nested calls uses its
// list like any other: the loader attaches lists by their quoted names in
// a rule that calls a list function. Its pattern of the call's shape
// missed these, so the rule was refused as naming an unknown list.
func TestAListCallWithAnyFirstArgument(t *testing.T) {
	for _, match := range []string{
		"inIpList([request.source_ip, '192.0.2.1'][0], 'tor-exit')",
		"inIpList(string(string(request.source_ip)), 'tor-exit')",
		"inIpList((request.source_ip) + (''), \"tor-exit\")",
	} {
		tree := listTree(denyRule("tor", match), map[string]string{"_lists/tor-exit.netset": "10.0.0.0/8\n"})
		b, errs := CompileTree(tree, policy.LoadOptions{}, DefaultOptions())
		if errs != nil {
			t.Errorf("%s: %v", match, errs)
			continue
		}
		if d, _ := b.Evaluate("edge", &Request{SourceIP: "10.1.2.3"}); d.Verdict != Deny {
			t.Errorf("%s: %+v, want the list's address denied", match, d)
		}
	}
}
