package api

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
)

func TestAuthorizeHTTP(t *testing.T) {
	e := newTestEnv(t, Config{})
	cases := []struct {
		name   string
		method string
		path   string
		header map[string]string
		code   int
		rule   string
	}{
		{"nginx allow", "GET", "/v1/policies/web:authorize",
			map[string]string{"X-Original-Method": "GET", "X-Original-URI": "/healthz?x=1"}, 200, "health"},
		{"nginx deny", "GET", "/v1/policies/web:authorize",
			map[string]string{"X-Original-Method": "GET", "X-Original-URI": "/admin/users"}, 403, "block-admin"},
		{"envoy path suffix, original method", "GET", "/v1/policies/web:authorize/healthz", nil, 200, "health"},
		{"envoy suffix with query", "GET", "/v1/policies/api:authorize/x?y=1",
			map[string]string{"X-Partner": "acme"}, 200, ""},
		{"envoy DELETE", "DELETE", "/v1/policies/api:authorize/thing", nil, 403, "no-delete"},
		{"POST form", "POST", "/v1/policies/api:authorize",
			map[string]string{"X-Original-Method": "delete", "X-Original-URI": "/thing"}, 403, "no-delete"},
		{"trusted proxy's client address", "GET", "/v1/policies/web:authorize/x",
			map[string]string{"X-Forwarded-For": "10.1.2.3"}, 200, "office-network"},
		{"X-Real-IP from trusted proxy", "GET", "/v1/policies/web:authorize/x",
			map[string]string{"X-Real-IP": "10.1.2.3"}, 200, "office-network"},
		{"forwarded host from trusted proxy", "GET", "/v1/policies/api:authorize/x",
			map[string]string{"X-Forwarded-Host": "EVIL.example", "X-Partner": "acme"}, 403, "evil-host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := e.do(tc.method, tc.path, nil, tc.header)
			if a.code != tc.code {
				t.Fatalf("code = %d, want %d: %s", a.code, tc.code, a.body)
			}
			wantVerdict := map[int]string{200: "ALLOW", 403: "DENY"}[tc.code]
			if a.header.Get("X-Policy-Decision") != wantVerdict || a.header.Get("X-Policy-Rule") != tc.rule || a.header.Get("X-Policy-Generation") != "7" {
				t.Errorf("headers = %v", a.header)
			}
		})
	}
}

func TestAuthorizeUntrustedProxyHeadersIgnored(t *testing.T) {
	e := newTestEnv(t, Config{TrustedProxies: []netip.Prefix{}})
	a := e.do("GET", "/v1/policies/web:authorize/x", nil, map[string]string{"X-Forwarded-For": "10.1.2.3", "X-Real-IP": "10.1.2.3"})
	if a.code != 403 || a.header.Get("X-Policy-Rule") != "" {
		t.Errorf("spoofed XFF honoured: %d %v", a.code, a.header)
	}
	a = e.do("GET", "/v1/policies/api:authorize/x", nil, map[string]string{"X-Forwarded-Host": "evil.example", "X-Partner": "acme"})
	if a.code != 200 {
		t.Errorf("X-Forwarded-Host from an untrusted peer honoured: %d %v", a.code, a.header)
	}
	// Malformed forwarding headers from an untrusted peer are never read.
	a = e.do("GET", "/v1/policies/api:authorize/x", nil, map[string]string{"X-Forwarded-For": "garbage", "X-Partner": "acme"})
	if a.code != 200 {
		t.Errorf("untrusted garbage XFF: %d %s", a.code, a.body)
	}
}

// TestAuthorizeBadInput: a malformed check is a deny (never a 400, which
// nginx would turn into a 500), whatever the failure mode: its sender could
// make it malformed on purpose.
func TestAuthorizeBadInput(t *testing.T) {
	for _, mode := range []FailureMode{FailureDeny, FailureAllow} {
		e := newTestEnv(t, Config{FailureModes: FailureModes{Default: mode}})
		for _, h := range []map[string]string{
			{"X-Forwarded-For": "not-an-ip"},
			{"X-Original-URI": "::not a uri"},
			{"X-Original-URI": "/a?b=%zz"},
		} {
			wantGatewayAnswer(t, e.do("GET", "/v1/policies/web:authorize", nil, h), 403, "INVALID_ARGUMENT: ")
		}
	}
}

// gatewayCase runs gatewayRequest on a request from remote.
func gatewayCase(t *testing.T, trusted []string, remote, target string, header map[string]string) (*engine.Request, error) {
	t.Helper()
	var prefixes []netip.Prefix
	for _, p := range trusted {
		prefixes = append(prefixes, netip.MustParsePrefix(p))
	}
	s := New(Config{Generations: &fakeGenerations{}, TrustedProxies: prefixes})
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = remote
	r.Header = http.Header{}
	for k, v := range header {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	_, tail, _ := cutAuthorize(r.URL.Path)
	return s.dec.gatewayRequest(r, tail, fixedNow())
}

func cutAuthorize(p string) (string, string, bool) {
	const verb = ":authorize"
	for i := 0; i+len(verb) <= len(p); i++ {
		if p[i:i+len(verb)] == verb {
			return p[:i], p[i+len(verb):], true
		}
	}
	return p, "", false
}

func TestGatewayRequestFields(t *testing.T) {
	req, err := gatewayCase(t, nil, "192.0.2.7:5555", "/v1/policies/web:authorize", map[string]string{
		"Host":              "Shop.Example:8443",
		"X-Original-Method": "post",
		"X-Original-URI":    "/cart/%61dd?item=1&item=2&q=a+b",
		"Accept":            "text/html",
		"X-Multi":           "one",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &engine.Request{
		Method: "POST", Path: "/cart/add", RawPath: "/cart/%61dd", Host: "shop.example:8443", Scheme: "http",
		Query:    engine.PairsOf(map[string]string{"item": "1", "q": "a b"}),
		Headers:  engine.PairsOf(map[string]string{"accept": "text/html", "x-multi": "one", "x-original-method": "post", "x-original-uri": "/cart/%61dd?item=1&item=2&q=a+b"}),
		SourceIP: "192.0.2.7", Time: fixedNow(),
	}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("request =\n%+v\nwant\n%+v", req, want)
	}
}

func TestGatewayRequestSuffixAndScheme(t *testing.T) {
	req, err := gatewayCase(t, []string{"10.0.0.0/8"}, "10.0.0.5:1", "/v1/policies/web:authorize/a/b:c?x=1", map[string]string{
		"X-Forwarded-Proto": "http, HTTPS",
	})
	if err != nil {
		t.Fatal(err)
	}
	if req.Path != "/a/b:c" || req.Query.Map()["x"] != "1" || req.Scheme != "https" || req.SourceIP != "10.0.0.5" {
		t.Errorf("request = %+v", req)
	}
	req, err = gatewayCase(t, nil, "10.0.0.5:1", "/v1/policies/web:authorize", map[string]string{"X-Original-URI": "https://h.example/p"})
	if err != nil || req.Scheme != "https" || req.Path != "/p" {
		t.Errorf("absolute X-Original-URI: %+v %v", req, err)
	}
}

func TestGatewayTLSScheme(t *testing.T) {
	s := New(Config{Generations: &fakeGenerations{}})
	r := httptest.NewRequest("GET", "/v1/policies/web:authorize/", nil)
	r.TLS = &tls.ConnectionState{}
	req, err := s.dec.gatewayRequest(r, "/", time.Now())
	if err != nil || req.Scheme != "https" {
		t.Errorf("%+v %v", req, err)
	}
}

func TestClientIP(t *testing.T) {
	trusted := []string{"10.0.0.0/8", "2001:db8::/32"}
	cases := []struct {
		name, remote, xff, realIP, want string
		bad                             bool
	}{
		{"untrusted peer", "192.0.2.1:1", "10.9.9.9", "", "192.0.2.1", false},
		{"untrusted peer, garbage headers", "192.0.2.1:1", "garbage", "garbage", "192.0.2.1", false},
		{"trusted peer, one hop", "10.0.0.1:1", "198.51.100.4", "", "198.51.100.4", false},
		{"rightmost untrusted hop wins", "10.0.0.1:1", "6.6.6.6, 198.51.100.4, 10.0.0.2", "", "198.51.100.4", false},
		{"all hops trusted: leftmost", "10.0.0.1:1", "10.0.0.3, 10.0.0.2", "", "10.0.0.3", false},
		{"hop with port", "10.0.0.1:1", "198.51.100.4:8080", "", "198.51.100.4", false},
		{"IPv6 hop in brackets", "10.0.0.1:1", "[2001:db9::1]:443", "", "2001:db9::1", false},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:1", "198.51.100.4", "", "198.51.100.4", false},
		{"trusted IPv6 peer", "[2001:db8::1]:1", "198.51.100.4", "", "198.51.100.4", false},
		{"X-Real-IP", "10.0.0.1:1", "", "198.51.100.9", "198.51.100.9", false},
		{"XFF before X-Real-IP", "10.0.0.1:1", "198.51.100.4", "198.51.100.9", "198.51.100.4", false},
		{"no headers: the peer", "10.0.0.1:1", "", "", "10.0.0.1", false},
		{"garbage hop that must be read", "10.0.0.1:1", "1.2.3.4, nonsense", "", "", true},
		{"forged hop left of the client is not read", "10.0.0.1:1", "nonsense, 198.51.100.4", "", "198.51.100.4", false},
		{"empty hop", "10.0.0.1:1", "198.51.100.4,", "", "", true},
		{"bad X-Real-IP", "10.0.0.1:1", "", "1.2.3", "", true},
		{"unparseable peer", "@", "198.51.100.4", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.xff != "" {
				h["X-Forwarded-For"] = tc.xff
			}
			if tc.realIP != "" {
				h["X-Real-IP"] = tc.realIP
			}
			req, err := gatewayCase(t, trusted, tc.remote, "/v1/policies/web:authorize", h)
			if tc.bad {
				if err == nil || classify(err).code != errs.InvalidArgument {
					t.Fatalf("err = %v, want invalid argument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.SourceIP != tc.want {
				t.Errorf("source_ip = %q, want %q", req.SourceIP, tc.want)
			}
		})
	}
}
