package preview_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
)

// secrets are values that must never leave the process unredacted.
var secrets = []string{"s3cr3t-bearer", "c00kie-value", "alice@example.com", "tok-123"}

func secretRequest() *engine.Request {
	r := req("GET", "http", "/account", "198.51.100.1")
	r.Headers = map[string]string{"authorization": "Bearer s3cr3t-bearer", "cookie": "sid=c00kie-value", "user-agent": "ua"}
	r.Query = map[string]string{"token": "tok-123", "page": "2"}
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
	if r.Headers["authorization"] != "Bearer s3cr3t-bearer" || r.Attributes["user"].(map[string]any)["email"] != "alice@example.com" {
		t.Fatal("redaction modified the live request")
	}
}

func TestRedactorPaths(t *testing.T) {
	m := preview.NewRedactor([]string{"headers.Authorization", "principal", "attributes.a.b", " ", "missing.path"}).Request(&engine.Request{
		Principal: "bob", Headers: map[string]string{"authorization": "x"},
		Attributes: map[string]any{"a": map[string]any{"b": 1.0, "c": 2.0}, "b": "kept"},
	})
	want := `{"attributes":{"a":{"b":"REDACTED","c":2},"b":"kept"},"headers":{"authorization":"REDACTED"},"principal":"REDACTED"}`
	if got, _ := json.Marshal(m); string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
