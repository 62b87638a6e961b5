package extauthz

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// outcome is what one decision form answered.
type outcome struct {
	verdict string // "ALLOW" or "DENY"
	rule    string
	err     string // X-Policy-Error, or the decision's error
}

// TestExamplePoliciesInEveryForm (issue 22, finding 11): every test of
// policies.example runs through :evaluate, the :authorize headers form
// (nginx's auth_request) and an ext_authz Check (Envoy), so that an
// example whose test passes only through :evaluate fails here: its rule
// would not work behind a gateway, where the path is normalised. A test
// whose request has attributes, a principal or groups, which no gateway
// form carries, runs through :evaluate only.
func TestExamplePoliciesInEveryForm(t *testing.T) {
	repo, err := policy.Load(os.DirFS("../../policies.example"), policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.NewBundle(repo.Policies, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Pointer[time.Time] // the test's time: its receipt time in every form
	e := newEnvWith(t, b, api.Config{Now: func() time.Time { return *clock.Load() }})
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}} // no Accept-Encoding added
	ran := map[string]int{}
	for _, p := range repo.Policies {
		for i := range p.Tests {
			tc := &p.Tests[i]
			req, err := engine.RequestFromMap(tc.Request)
			if err != nil {
				t.Fatalf("%s: %s: %v", p.Name, tc.Name, err)
			}
			clock.Store(&req.Time)
			forms := map[string]func() outcome{"evaluate": func() outcome { return evaluateForm(t, e, client, p.Name, tc) }}
			if len(req.Attributes) == 0 && req.Principal == "" && len(req.Groups) == 0 {
				forms["authorize"] = func() outcome { return authorizeForm(t, e, client, p.Name, req) }
				forms["check"] = func() outcome { return checkForm(t, e, p.Name, req) }
			}
			for form, decide := range forms {
				ran[form]++
				if msg := judge(tc, decide()); msg != "" {
					t.Errorf("%s test %q through %s: %s", p.Name, tc.Name, form, msg)
				}
			}
		}
	}
	t.Logf("tests run by form: %v", ran)
	if ran["authorize"] == 0 || 2*ran["check"] < ran["evaluate"] {
		t.Errorf("only %d of %d example tests could run through the gateway forms", ran["check"], ran["evaluate"])
	}
}

// judge says how o differs from what tc expects, or "".
func judge(tc *policy.Test, o outcome) string {
	var diffs []string
	if !strings.EqualFold(o.verdict, string(tc.Expect)) {
		diffs = append(diffs, "got "+o.verdict+", want "+string(tc.Expect))
	}
	if tc.Rule != nil && o.rule != *tc.Rule {
		diffs = append(diffs, "decided by rule "+o.rule+", want "+*tc.Rule)
	}
	if len(diffs) > 0 && o.err != "" {
		diffs = append(diffs, "error: "+o.err)
	}
	return strings.Join(diffs, "; ")
}

// evaluateForm posts the test's request, as written, to :evaluate.
func evaluateForm(t *testing.T, e *env, c *http.Client, name string, tc *policy.Test) outcome {
	body, err := json.Marshal(tc.Request)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(e.http.URL+"/v1/policies/"+name+":evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct{ Decision, Rule, Error string }
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf(":evaluate %s: %d %v", body, resp.StatusCode, err)
	}
	return outcome{d.Decision, d.Rule, d.Error}
}

// authorizeForm asks :authorize as nginx's auth_request does: the original
// method and URI in X-Original-*, the client and scheme in X-Forwarded-*
// from a trusted proxy (the test server's peer is 127.0.0.1).
func authorizeForm(t *testing.T, e *env, c *http.Client, name string, req *engine.Request) outcome {
	hr, err := http.NewRequest(http.MethodGet, e.http.URL+"/v1/policies/"+name+":authorize", nil)
	if err != nil {
		t.Fatal(err)
	}
	hr.Host = req.Host
	hr.Header.Set("User-Agent", "") // none unless the test has one
	for k, v := range req.Headers.All() {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("X-Original-Method", req.Method)
	hr.Header.Set("X-Original-URI", requestURI(req))
	hr.Header.Set("X-Forwarded-For", req.SourceIP)
	hr.Header.Set("X-Forwarded-Proto", req.Scheme)
	resp, err := c.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := outcome{verdict: resp.Header.Get("X-Policy-Decision"), rule: resp.Header.Get("X-Policy-Rule"), err: resp.Header.Get("X-Policy-Error")}
	if (resp.StatusCode == http.StatusOK) != (o.verdict == "ALLOW") {
		t.Errorf(":authorize answered %d with X-Policy-Decision %q", resp.StatusCode, o.verdict)
	}
	return o
}

// checkForm asks as Envoy's ext_authz does, from the client's address.
func checkForm(t *testing.T, e *env, name string, req *engine.Request) outcome {
	r := e.check(t, checkReq{method: req.Method, path: requestURI(req), host: req.Host, scheme: req.Scheme,
		source: req.SourceIP, headers: req.Headers.Map(), ext: map[string]string{ExtPolicy: name}})
	h := headersOfResponse(r)
	return outcome{verdict: h["x-policy-decision"], rule: h["x-policy-rule"], err: h["x-policy-error"]}
}

// requestURI is the request-target a gateway passes on: the path as the
// client sent it (raw_path if the test gives one, else path), and the query.
func requestURI(req *engine.Request) string {
	raw := req.RawPath
	if raw == "" {
		raw = req.Path
	}
	if req.Query.Len() == 0 {
		return raw
	}
	q := url.Values{}
	for k, v := range req.Query.All() {
		q.Set(k, v)
	}
	return raw + "?" + q.Encode()
}
