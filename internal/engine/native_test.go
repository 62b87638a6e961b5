package engine

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"

	"github.com/policyrollout/reconciler/internal/policy"
)

// nativeShapes are rules in the shapes native plans cover, and around
// their edges: a missing header on either side of && and ||, where CEL's
// error loses to false (&&) or true (||) and wins otherwise; sizes with
// every comparison; lowerAscii of non-ASCII input; addresses that do not
// parse or are IPv4-mapped; a regex that is not a word list.
const nativeShapes = `default_action = "allow"
on_error = "skip"
include = []

[[rules]]
name = "hdr-and"
priority = 1
action = "deny"
match = 'request.headers["x-a"] == "1" && request.method == "POST"'

[[rules]]
name = "hdr-and-rev"
priority = 2
action = "deny"
match = 'request.method == "DELETE" && request.headers["x-a"] == "2"'

[[rules]]
name = "hdr-or"
priority = 3
action = "deny"
match = 'request.headers["x-b"].startsWith("z") || request.path.endsWith(".zip")'

[[rules]]
name = "sizes"
priority = 4
action = "deny"
match = 'size(request.query) >= 3 && request.headers.size() < 9 && size(request.groups) != 1 && size(request.query) <= 4 && 2 < size(request.query) && size(request.groups) == 0'

[[rules]]
name = "lower"
priority = 5
action = "deny"
match = 'request.host.lowerAscii() == "shop.example.com" && request.headers["x-c"].lowerAscii().contains("evil")'

[[rules]]
name = "lower-invalid"
priority = 5
action = "deny"
match = 'request.headers["x-c"].lowerAscii() == "\ufffdevil"'

[[rules]]
name = "attributes"
priority = 5
action = "deny"
match = '("n" in request.attributes && double(request.attributes["n"]) > 10.0) || double(request.attributes.m) <= 2.5'

[[rules]]
name = "ranges"
priority = 6
action = "deny"
match = 'inIpRange(request.source_ip, "203.0.113.0/24") || inIpRange(request.source_ip, "2001:db8::/32")'

[[rules]]
name = "in-things"
priority = 7
action = "deny"
match = '"admin" in request.groups && !("x-skip" in request.headers) && "q" in request.query && request.principal != ""'

[[rules]]
name = "regex"
priority = 8
action = "deny"
match = 'request.raw_path.matches("(?i)(passwd|wp-admin)") || matches(request.scheme, "ws")'

[[rules]]
name = "retired"
priority = 9
action = "deny"
match = 'inList(request.host.lowerAscii(), "retired-hosts") || inIpList(request.headers["x-real-ip"], "abuse-blocklist")'

[[rules]]
name = "literals"
priority = 10
action = "deny"
match = 'false || (true && request.method in ["PUT", "PATCH"]) || request.path in ["/l1", "/l2", "/l3", "/l4", "/l5", "/l6", "/l7", "/l8", "/l9", "/.env"]'
`

// nativeEdgeRequests are requests at the edges of what native plans
// cover, besides the 2,500 samples.
func nativeEdgeRequests() []*Request {
	q := func(n int) Pairs {
		m := map[string]string{}
		for i := range n {
			m["k"+strconv.Itoa(i)] = "v"
		}
		return PairsOf(m)
	}
	return []*Request{
		{},
		{Method: "POST", Headers: PairsOf(map[string]string{"x-a": "1"})},
		{Method: "POST"},
		{Method: "DELETE"},
		{Method: "DELETE", Headers: PairsOf(map[string]string{"x-a": "2"})},
		{Method: "GET", Path: "/f.zip"},
		{Method: "GET", Path: "/f.zip", Headers: PairsOf(map[string]string{"x-b": "zz"})},
		{Method: "GET", Path: "/f", Headers: PairsOf(map[string]string{"x-b": "a"})},
		{Query: q(3)}, {Query: q(4), Groups: []string{}}, {Query: q(5)}, {Query: q(3), Groups: []string{"a"}},
		{Host: "SHOP.Example.com", Headers: PairsOf(map[string]string{"x-c": "very EVIL"})},
		{Host: "shöp.example.com", Headers: PairsOf(map[string]string{"x-c": "evil"})},
		{Host: "shop.example.com", Headers: PairsOf(map[string]string{"x-c": "\xffevil"})},
		{Headers: PairsOf(map[string]string{"x-c": "\xc3EVIL"})},
		{Host: "shop.example.com"},
		{SourceIP: "203.0.113.9"}, {SourceIP: "::ffff:203.0.113.9"}, {SourceIP: "not an address"},
		{SourceIP: "fe80::1%eth0"}, {SourceIP: "2001:db8::1"},
		{Groups: []string{"admin"}, Query: PairsOf(map[string]string{"q": ""}), Principal: "p"},
		{Groups: []string{"admin"}, Query: PairsOf(map[string]string{"q": ""}), Principal: "p", Headers: PairsOf(map[string]string{"x-skip": ""})},
		{RawPath: "/etc/PassWD"}, {RawPath: "/wp-admın"}, {RawPath: "/Wp-Admin/x"}, {Scheme: "wss"},
		{Host: "OLD.example.com", Headers: PairsOf(map[string]string{"x-real-ip": "192.0.2.1"})},
		{Attributes: map[string]any{"n": 11.0}}, {Attributes: map[string]any{"n": 10.0, "m": 2.5}},
		{Attributes: map[string]any{"n": "12"}}, {Attributes: map[string]any{"n": int64(12)}}, {Attributes: map[string]any{"n": int64(10)}},
		{Attributes: map[string]any{"m": true}}, {Attributes: map[string]any{"m": 3, "n": nil}},
		{Attributes: map[string]any{"n": map[string]any{}}},
		{Method: "PATCH"}, {Method: "patch"}, {Path: "/l7"}, {Path: "/l"}, {Path: "/l99"}, {Method: "TRACE", Path: "/.env", RawPath: "/%2e%2e/x"},
	}
}

// TestNativePlansAgreeWithCEL: wherever a native plan decides a rule, it
// decides as the rule's CEL program does, and wherever that program
// fails, the plan leaves the rule to it. Every rule of the example tree
// and of nativeShapes, over the 2,500 samples and the edge requests.
func TestNativePlansAgreeWithCEL(t *testing.T) {
	t.Parallel()
	files := exampleTreeWith(t, nil)
	files["native-shapes/policy.toml"] = []byte(nativeShapes)
	bundle, errs := CompileTree(files, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	data, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	reqs := nativeEdgeRequests()
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		req, err := DecodeRequest(l)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	planned, decided, left := 0, 0, 0
	for _, name := range []string{"edge-firewall", "admin-api", "native-shapes"} {
		cp, ok := bundle.Policy(name)
		if !ok {
			t.Fatalf("no policy %s", name)
		}
		for i := range cp.rules {
			r := &cp.rules[i]
			if r.native == nil {
				continue
			}
			planned++
			for k, req := range reqs {
				st := newEvalState(req)
				out, _, err := r.tracked.Eval(st)
				st.release()
				v, ok := r.native(req)
				switch {
				case !ok:
					left++
				case err != nil:
					t.Errorf("%s/%s, request %d: native %v, CEL fails: %v", name, r.name, k, v, err)
				case (out == types.True) != v:
					t.Errorf("%s/%s, request %d: native %v, CEL %v", name, r.name, k, v, out)
				default:
					decided++
				}
			}
		}
	}
	t.Logf("%d rules with native plans; %d evaluations decided natively, %d left to CEL", planned, decided, left)
	if planned == 0 || decided == 0 || left == 0 {
		t.Fatal("the comparison compared nothing on one side")
	}
}

// TestNativePlanCoverage: the shapes nativeShapes writes all have native
// plans, and matches outside them (a timestamp, a regex that is not a
// list of words) have none.
func TestNativePlanCoverage(t *testing.T) {
	files := map[string][]byte{
		"_lists/retired-hosts.txt":      []byte("old.example.com\n"),
		"_lists/abuse-blocklist.netset": []byte("192.0.2.0/24\n"),
		"p/policy.toml": []byte(strings.Replace(nativeShapes, "include = []\n", "", 1) +
			"\n[[rules]]\nname = \"time\"\npriority = 11\naction = \"deny\"\nmatch = 'request.time.getHours() == 3'\n" +
			"\n[[rules]]\nname = \"other-regex\"\npriority = 12\naction = \"deny\"\nmatch = 'request.path.matches(\"^/a/[0-9]+$\")'\n"),
	}
	bundle, errs := CompileTree(files, policy.LoadOptions{}, DefaultOptions())
	if errs != nil {
		t.Fatal(errs)
	}
	cp, _ := bundle.Policy("p")
	for i := range cp.rules {
		r := &cp.rules[i]
		if want := r.name != "time" && r.name != "other-regex"; (r.native != nil) != want {
			t.Errorf("rule %s: native plan %v, want %v", r.name, r.native != nil, want)
		}
	}
}
