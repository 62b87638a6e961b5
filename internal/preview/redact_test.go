package preview_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// secrets are values that must never leave the process unredacted.
var secrets = []string{"s3cr3t-bearer", "c00kie-value", "alice@example.com", "tok-123"}

func secretRequest() *engine.Request {
	r := req("GET", "http", "/account", "198.51.100.1")
	r.Headers = engine.PairsOf(map[string]string{"authorization": "Bearer s3cr3t-bearer", "cookie": "sid=c00kie-value", "user-agent": "ua"})
	r.Query = engine.PairsOf(map[string]string{"token": "tok-123", "page": "2"})
	r.Attributes = map[string]any{"user": map[string]any{"email": "alice@example.com", "plan": "pro"}}
	return r
}

func assertNoSecrets(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s contains the secret %q", where, s)
		}
	}
}

// No redacted value may appear in stats, samples, the log, or any rendering.
func TestRedactionEverywhere(t *testing.T) {
	cfg := preview.Config{UnchangedEvery: 1,
		Redact: append([]string{"attributes.user.email", "Query.TOKEN"}, preview.DefaultRedact...)}
	h := newHarness(t, cfg, webPolicy())
	a := start(t, create(t, nil, "a", tightWeb()), t0)
	b := start(t, create(t, []*preview.Experiment{a}, "b", webPolicy()), t0)
	h.set(a, b)
	r := secretRequest()
	h.offer("web", r, secretRequest())
	stats, _ := json.Marshal(h.sh.Stats())
	assertNoSecrets(t, "stats", string(stats))
	assertNoSecrets(t, "preview log", h.log.String())
	if !strings.Contains(h.log.String(), preview.Redacted) || !strings.Contains(string(stats), preview.Redacted) {
		t.Error("redacted fields should read REDACTED")
	}
	if len(h.stats(a).Samples) == 0 || len(h.log.lines(t)) != 4 {
		t.Fatalf("want samples and 4 log lines: %d samples, log %q", len(h.stats(a).Samples), h.log.String())
	}
	sums := []preview.Summary{preview.Summarize(a, webPolicy().Etag(), h.sh.Stats(), preview.Thresholds{})}
	var out bytes.Buffer
	preview.RenderMarkdown(&out, preview.Report{Summaries: sums, Commands: true})
	preview.RenderText(&out, sums)
	preview.RenderJSON(&out, sums)
	assertNoSecrets(t, "renderings", out.String())
	if auth, _ := r.Headers.Get("authorization"); auth != "Bearer s3cr3t-bearer" || r.Attributes["user"].(map[string]any)["email"] != "alice@example.com" {
		t.Fatal("redaction modified the live request")
	}
}

func TestRedactorPaths(t *testing.T) {
	m := preview.NewRedactor([]string{"headers.Authorization", "principal", "attributes.a.b", " ", "missing.path"},
		[]string{"headers.authorization", "attributes.a", "attributes.b"}).Request(&engine.Request{
		Principal: "bob", Headers: engine.PairsOf(map[string]string{"authorization": "x"}),
		Attributes: map[string]any{"a": map[string]any{"b": 1.0, "c": 2.0}, "b": "kept"},
	})
	want := `{"attributes":{"a":{"b":"REDACTED","c":2},"b":"kept"},"headers":{"authorization":"REDACTED"},"principal":"REDACTED"}`
	if got, _ := json.Marshal(m); string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// TestAllowListHidesLiveCredentials (issue 16, attack 3): a fork's rule
// denying requests with x-api-key filled the samples of its pull request
// comment with live users' credentials, under names no deny-list names.
// With the defaults, values of headers, query parameters and attributes
// are hidden unless shown; their names remain, so the change is still
// understandable.
func TestAllowListHidesLiveCredentials(t *testing.T) {
	planted := []string{"LIVE-API-KEY-0", "LIVE-PROXY-CRED", "LIVE-ACCESS-TOKEN", "LIVE-SESSION"}
	fork := webPolicy()
	fork.Rules = append(fork.Rules, policy.Rule{Name: "deny-api-keys", Priority: 1, Action: policy.ActionDeny,
		Match: "'x-api-key' in request.headers"})
	h := newHarness(t, preview.Config{UnchangedEvery: 1}, webPolicy())
	e := start(t, create(t, nil, "pr-7", fork), t0)
	h.set(e)
	r := req("GET", "https", "/v1/orders", "203.0.113.9")
	r.Headers = engine.PairsOf(map[string]string{"x-api-key": planted[0], "proxy-authorization": "Basic " + planted[1],
		"user-agent": "curl/8.5.0", "x-session": planted[3]})
	r.Query = engine.PairsOf(map[string]string{"access_token": planted[2], "page": "2"})
	r.Attributes = map[string]any{"session": map[string]any{"id": planted[3]}}
	h.offer("web", r)

	stats, _ := json.Marshal(h.sh.Stats())
	var out bytes.Buffer
	sums := []preview.Summary{preview.Summarize(e, webPolicy().Etag(), h.sh.Stats(), preview.Thresholds{})}
	preview.RenderMarkdown(&out, preview.Report{Summaries: sums, Commands: true})
	for where, text := range map[string]string{"stats": string(stats), "preview log": h.log.String(), "comment": out.String()} {
		for _, s := range planted {
			if strings.Contains(text, s) {
				t.Errorf("%s contains the planted secret %q", where, s)
			}
		}
	}
	if len(h.stats(e).Samples) == 0 {
		t.Fatal("no sample kept")
	}
	for _, want := range []string{`"x-api-key":"REDACTED"`, `"access_token":"REDACTED"`, `"user-agent":"curl/8.5.0"`, `"path":"/v1/orders"`} {
		if !strings.Contains(string(stats), want) || !strings.Contains(h.log.String(), want) {
			t.Errorf("stats and log should hold %s:\n%s\n%s", want, stats, h.log.String())
		}
	}
}

// Hidden follows the samples: a value is shown only when [preview] show
// names it and no redact path covers it.
func TestRedactorHidden(t *testing.T) {
	r := preview.NewRedactor([]string{"headers.accept", "attributes.tenant.owner"}, []string{"headers.user-agent", "headers.accept", "query.page", "attributes.tenant"})
	for read, want := range map[string]bool{
		"headers.User-Agent": false, "headers.x-api-key": true, "headers": true, "headers.accept": true,
		"query.page": false, "query.access_token": true, "attributes.tenant": true, "attributes.session": true,
		"path": false,
	} {
		if got := r.Hidden(read); got != want {
			t.Errorf("Hidden(%q) = %v, want %v", read, got, want)
		}
	}
}
