package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Random policies and requests for the index property test. The pools are
// small on purpose, so that requests often satisfy some conjuncts of a rule
// and not others, ranges and prefixes overlap, and errors happen.

var (
	genMethods  = []string{"GET", "POST", "PUT", "DELETE", "get"}
	genHosts    = []string{"a.example", "b.example", "c.example", "A.example"}
	genPrefixes = []string{"", "/", "/a", "/a/", "/a/b", "/api/v1/", "/b", "/api"}
	genRanges   = []string{
		"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "10.2.0.0/16", "192.168.0.0/16",
		"0.0.0.0/0", "2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::5/128", "::/0", "fe80::/10",
		"10.1.2.128/25", "10.1.0.0/15",
	}
	genPaths = []string{"", "/", "/a", "/a/1", "/a/b", "/a/b/c", "/api", "/api/v1/x", "/b", "/ab", "/A"}
	// Header names: "tenant" is also written as request.headers.tenant.
	genHeaderNames  = []string{"x-t", "x-u", "tenant"}
	genHeaderValues = []string{"a", "b", "c", ""}
	genGroups       = []string{"admin", "a", "b", "g", ""}
	genIPs          = []string{
		"10.1.2.3", "10.1.2.200", "10.1.9.9", "10.2.3.4", "10.200.0.1", "192.168.1.1", "8.8.8.8",
		"2001:db8::1", "2001:db8:1::5", "2001:db8:1::6", "2001:db9::1", "fe80::1", "::1",
		"", "bad", "::ffff:10.1.2.3", "fe80::1%eth0", "10.1.2.3.4", "010.1.2.3",
	}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// genIndexable returns conjuncts the index understands: one, or two for
// a guarded header test (the guard and the value test, which genMatch may
// separate and reorder).
func genIndexable(r *rand.Rand) []string {
	switch r.IntN(7) {
	case 0:
		return []string{genIPTest(r)}
	case 1:
		return []string{genEquality(r, "method", genMethods)}
	case 2:
		return []string{genEquality(r, "host", genHosts)}
	case 3:
		return []string{genPathTest(r)}
	case 4:
		return []string{genGroupTest(r)}
	}
	name := pick(r, genHeaderNames)
	switch r.IntN(3) {
	case 0: // unguarded: an error when the header is missing
		return []string{genHeaderValueTest(r, name)}
	case 1: // guarded
		return []string{genHeaderPresence(r, name), genHeaderValueTest(r, name)}
	}
	return []string{genHeaderPresence(r, name)}
}

// genHeaderValueTest tests the value of header name, which is an error
// when the header is missing.
func genHeaderValueTest(r *rand.Rand, name string) string {
	h := fmt.Sprintf("request.headers['%s']", name)
	if name == "tenant" && r.IntN(2) == 0 {
		h = "request.headers.tenant"
	}
	v1, v2 := pick(r, genHeaderValues), pick(r, genHeaderValues)
	switch r.IntN(4) {
	case 0:
		return fmt.Sprintf("%s == '%s'", h, v1)
	case 1:
		return fmt.Sprintf("'%s' == %s", v1, h)
	case 2:
		return fmt.Sprintf("%s in ['%s', '%s']", h, v1, v2)
	}
	return fmt.Sprintf("(%s == '%s' || %s == '%s')", h, v1, h, v2)
}

// genHeaderPresence tests that header name is present: false, never an
// error, when it is missing.
func genHeaderPresence(r *rand.Rand, name string) string {
	if name == "tenant" && r.IntN(2) == 0 {
		return "has(request.headers.tenant)"
	}
	if r.IntN(5) == 0 {
		return fmt.Sprintf("('%s' in request.headers || '%s' in request.headers)", name, name)
	}
	return fmt.Sprintf("'%s' in request.headers", name)
}

func genGroupTest(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return fmt.Sprintf("('%s' in request.groups || '%s' in request.groups)", pick(r, genGroups), pick(r, genGroups))
	}
	return fmt.Sprintf("'%s' in request.groups", pick(r, genGroups))
}

func genIPTest(r *rand.Rand) string {
	one := func() string {
		c := pick(r, genRanges)
		switch r.IntN(3) {
		case 0:
			return fmt.Sprintf("inIpRange(request.source_ip, '%s')", c)
		case 1:
			return fmt.Sprintf("cidr('%s').containsIP(request.source_ip)", c)
		}
		return fmt.Sprintf("cidr('%s').containsIP(ip(request.source_ip))", c)
	}
	if r.IntN(4) == 0 {
		return "(" + one() + " || " + one() + ")"
	}
	return one()
}

func genEquality(r *rand.Rand, f string, pool []string) string {
	switch r.IntN(4) {
	case 0:
		return fmt.Sprintf("request.%s == '%s'", f, pick(r, pool))
	case 1:
		return fmt.Sprintf("'%s' == request.%s", pick(r, pool), f)
	case 2:
		return fmt.Sprintf("request.%s in ['%s', '%s']", f, pick(r, pool), pick(r, pool))
	}
	return fmt.Sprintf("(request.%s == '%s' || request.%s == '%s')", f, pick(r, pool), f, pick(r, pool))
}

func genPathTest(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return fmt.Sprintf("request.path.startsWith('%s')", pick(r, genPrefixes))
	case 1:
		return fmt.Sprintf("request.path == '%s'", pick(r, genPaths))
	case 2:
		return fmt.Sprintf("request.path in ['%s', '%s']", pick(r, genPaths), pick(r, genPaths))
	}
	return fmt.Sprintf("(request.path.startsWith('%s') || request.path.startsWith('%s'))",
		pick(r, genPrefixes), pick(r, genPrefixes))
}

// genOther returns a conjunct the index does not use: some look alike but
// are not necessary conditions, some fail at run time on some requests.
var genOthers = []string{
	"request.headers['x-a'] == 'v'",   // error when the header is missing
	"int(request.headers['x-n']) > 5", // error when not a number
	"request.principal == 'alice'",    // not an indexed field
	"request.groups.exists(g, g == 'admin')",
	"request.groups.all(g, g.size() < 40)", // costly with many groups
	"request.path.matches('^/a/[0-9]+$')",
	"ip(request.source_ip).family() == 4", // error on a bad address
	"request.method != 'DELETE'",
	"!inIpRange(request.source_ip, '10.1.0.0/16')",
	"(inIpRange(request.source_ip, '10.0.0.0/8') || request.principal == 'bob')",
	"(request.method == 'GET' || request.host == 'a.example')",
	"request.host.startsWith('a')",
	"true",
	"false",
	"has(request.attributes.k)",
	"request.attributes.k == 1",                   // error when k is missing
	"cidr('10.0.0.0/8').containsIP(request.host)", // error: host is not an address
	"(request.method == 'GET' && request.path.startsWith('/a'))",
	// Header and group look-alikes that are not necessary conditions.
	"!('x-t' in request.headers)",
	"request.headers['x-t'] != 'a'",
	"('x-t' in request.headers || 'x-u' in request.headers)",
	"(request.headers['x-t'] == 'a' || 'x-u' in request.headers)", // error or true
	"(request.headers['x-t'] == 'a' || 'x-t' in request.headers)", // true with any value
	"('tenant' in request.headers || request.headers.tenant == 'b')",
	"(has(request.headers.tenant) || request.headers['x-t'] == 'b')",
	"('admin' in request.groups || request.method == 'GET')",
	"!('admin' in request.groups)",
	"request.headers.size() > 1",
	"request.headers.exists(k, k == 'x-t')",
	// The whole request as a value, which Evaluate binds differently.
	"dyn(request).headers['x-t'] == 'a'",
	"[request][0].principal == 'alice'",
	"has(request.headers) && has(request.groups)",
}

// genMatch joins indexable and other conjuncts in random order and nesting.
func genMatch(r *rand.Rand, indexable bool) string {
	var parts []string
	if indexable {
		for range 1 + r.IntN(3) {
			parts = append(parts, genIndexable(r)...)
		}
	}
	for range r.IntN(3) {
		parts = append(parts, pick(r, genOthers))
	}
	if len(parts) == 0 {
		parts = append(parts, pick(r, genOthers))
	}
	r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return nest(r, parts)
}

// nest joins parts with && in a random tree shape.
func nest(r *rand.Rand, parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	k := 1 + r.IntN(len(parts)-1)
	return "(" + nest(r, parts[:k]) + ") && (" + nest(r, parts[k:]) + ")"
}

func genPolicy(r *rand.Rand, n int) *policy.Policy {
	p := &policy.Policy{
		Name:          "gen",
		DefaultAction: pick(r, []policy.Action{policy.ActionAllow, policy.ActionDeny}),
		OnError:       pick(r, []policy.OnError{policy.OnErrorDeny, policy.OnErrorAllow, policy.OnErrorSkip}),
	}
	for i := range n {
		p.Rules = append(p.Rules, policy.Rule{
			Name:     fmt.Sprintf("r%03d", i),
			Priority: int64(r.IntN(n/2 + 1)), // ties are common
			Action:   pick(r, []policy.Action{policy.ActionAllow, policy.ActionDeny}),
			Match:    genMatch(r, r.IntN(5) != 0),
			Pos:      policy.Pos{File: "gen/policy.toml", Line: i + 1},
		})
	}
	return p
}

func genRequest(r *rand.Rand) *Request {
	req := &Request{
		Method:    pick(r, append(genMethods, "")),
		Host:      pick(r, append(genHosts, "")),
		Path:      pick(r, genPaths),
		SourceIP:  pick(r, genIPs),
		Principal: pick(r, []string{"", "alice", "bob"}),
	}
	h := map[string]string{}
	if r.IntN(2) == 0 {
		h["x-a"] = pick(r, []string{"v", "w"})
	}
	if r.IntN(2) == 0 {
		h["x-n"] = pick(r, []string{"3", "9", "nine"})
	}
	for _, name := range genHeaderNames {
		if r.IntN(3) != 0 { // missing a third of the time
			h[name] = pick(r, append(genHeaderValues, "zzz"))
		}
	}
	if r.IntN(10) == 0 {
		h = nil
	}
	req.Headers = PairsOf(h)
	switch r.IntN(6) {
	case 0:
		req.Groups = []string{"admin"}
	case 1:
		req.Groups = strings.Split(strings.Repeat("g,", 300), ",") // beyond the estimate's 64
	case 2:
		req.Groups = append(strings.Split(strings.Repeat("g,", 70), ","), "admin", "a")
	case 3:
		for _, g := range genGroups {
			if r.IntN(2) == 0 {
				req.Groups = append(req.Groups, g)
			}
		}
	case 4:
		req.Groups = []string{"zzz", "b", "b"}
	}
	if r.IntN(2) == 0 {
		req.Attributes = map[string]any{"k": float64(r.IntN(3))}
	}
	return req
}
