package api

import (
	"os"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// TestAuthorizeNormalisesPaths (issue 16, attack 6): with the example
// policy, "//internal/metrics" and "/./.git/config" were allowed where
// "/internal/metrics" and "/.git/config" are denied. Every spelling of a
// denied path is denied now, in both gateway forms.
func TestAuthorizeNormalisesPaths(t *testing.T) {
	repo, err := policy.Load(os.DirFS("../../policies.example"), policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.NewBundle(repo.Policies, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 3, Bundle: b})
	e := newTestEnv(t, Config{Generations: gens})
	client := map[string]string{"Host": "shop.example.com", "X-Forwarded-For": "85.214.132.117",
		"User-Agent": "Mozilla/5.0", "Cf-Ipcountry": "DE"}
	for _, p := range []string{
		"/internal/metrics", "//internal/metrics", "/./internal/metrics", "/x/../internal/metrics",
		"/%69nternal/metrics", "/internal//metrics",
		"/.git/config", "/./.git/config", "//.git/config", "/%2e%67it/config", "/a/%2E%2E/.git/config",
	} {
		for _, form := range []struct {
			path   string
			header map[string]string
		}{
			{"/v1/policies/edge-firewall:authorize", with(client, "X-Original-Uri", p)},
			{"/v1/policies/edge-firewall:authorize" + p, client},
		} {
			a := e.do("GET", form.path, nil, form.header)
			if a.code != 403 {
				t.Errorf("%s via %s: %d %s %s", p, form.path, a.code, a.header.Get("X-Policy-Rule"), a.body)
			}
		}
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}

// exampleEnv serves policies.example as generation 3 with cfg.
func exampleEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	repo, err := policy.Load(os.DirFS("../../policies.example"), policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.NewBundle(repo.Policies, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 3, Bundle: b})
	cfg.Generations = gens
	return newTestEnv(t, cfg)
}

// slashPaths spell "/internal/metrics", which the example denies from the
// internet, with an escaped slash or a backslash.
var slashPaths = []string{"/%2finternal/metrics", "/%2Finternal/metrics", "/internal%2fmetrics",
	`/internal\metrics`, `/\internal\metrics`, "/internal%5cmetrics", "/%5Cinternal/metrics"}

// TestAuthorizeEscapedSlashes (issue 22, finding 8): "/%2finternal/metrics"
// and "/internal\metrics" were allowed where "//internal/metrics" is
// denied: "%2F" was decoded after the slashes were merged, and a backslash
// kept. By default such a path is refused now (a deny, INVALID_ARGUMENT);
// with "unescape" it is "/internal/metrics" and the rule denies it; "keep"
// is Envoy's KEEP_UNCHANGED, which rules about "/internal/" miss.
func TestAuthorizeEscapedSlashes(t *testing.T) {
	client := map[string]string{"Host": "shop.example.com", "X-Forwarded-For": "85.214.132.117",
		"User-Agent": "Mozilla/5.0", "Cf-Ipcountry": "DE"}
	for _, mode := range []engine.EscapedSlashes{engine.RejectEscapedSlashes, engine.UnescapeSlashes, engine.KeepEscapedSlashes} {
		e := exampleEnv(t, Config{PathEscapedSlashes: mode})
		for _, p := range slashPaths {
			for _, form := range []struct {
				path   string
				header map[string]string
			}{
				{"/v1/policies/edge-firewall:authorize", with(client, "X-Original-Uri", p)},
				{"/v1/policies/edge-firewall:authorize" + p, client},
			} {
				a := e.do("GET", form.path, nil, form.header)
				rule, perr := a.header.Get("X-Policy-Rule"), a.header.Get("X-Policy-Error")
				var ok bool
				switch mode {
				case engine.RejectEscapedSlashes:
					ok = a.code == 403 && strings.HasPrefix(perr, "INVALID_ARGUMENT: ") && strings.Contains(perr, "escaped slash")
				case engine.UnescapeSlashes:
					ok = a.code == 403 && rule == "deny-internal-paths-from-internet"
				case engine.KeepEscapedSlashes:
					ok = a.code == 200 && perr == ""
				}
				if !ok {
					t.Errorf("%s: %s via %s: %d rule %q error %q", mode, p, form.path, a.code, rule, perr)
				}
			}
		}
	}
}

// TestMirrorEscapedSlashes: :mirror reads a path as :authorize does (one
// function): refused by default, "/internal/metrics" with "unescape", the
// escape kept with "keep"; raw_path is the path as sent.
func TestMirrorEscapedSlashes(t *testing.T) {
	want := map[engine.EscapedSlashes]string{engine.UnescapeSlashes: "/internal/metrics", engine.KeepEscapedSlashes: "/%2Finternal/metrics"}
	for _, mode := range []engine.EscapedSlashes{engine.RejectEscapedSlashes, engine.UnescapeSlashes, engine.KeepEscapedSlashes} {
		rec := &mirrorRecorder{}
		e := exampleEnv(t, Config{PathEscapedSlashes: mode, Mirror: rec})
		a := e.do("GET", "/v1/policies/edge-firewall:mirror", nil, map[string]string{"X-Original-URI": "/%2finternal/metrics?a=b"})
		if mode == engine.RejectEscapedSlashes {
			wantError(t, a, 400, "INVALID_ARGUMENT")
			if got := rec.take(); len(got) != 0 {
				t.Errorf("a refused path was mirrored: %+v", got[0])
			}
			continue
		}
		got := rec.take()
		if a.code != 204 || len(got) != 1 || got[0].Path != want[mode] || got[0].RawPath != "/%2finternal/metrics" {
			t.Errorf("%s: %d, mirrored %+v", mode, a.code, got)
		}
	}
}

// TestGatewayRawPathAsSent: raw_path is the path exactly as the client
// wrote it in X-Original-URI (origin or absolute form), without the query,
// where url.URL would re-escape a backslash.
func TestGatewayRawPathAsSent(t *testing.T) {
	rec := &mirrorRecorder{}
	e := newTestEnv(t, Config{Mirror: rec, PathEscapedSlashes: engine.KeepEscapedSlashes})
	for uri, want := range map[string]string{
		"/static/../../etc/passwd?x=1":      "/static/../../etc/passwd",
		`/a\b`:                              `/a\b`,
		"/%2e%2E/x":                         "/%2e%2E/x",
		"https://shop.example/a//b?q":       "/a//b",
		"HTTP://shop.example":               "",
		"http://shop.example?q=1":           "",
		"http://user@shop.example:81/p%41x": "/p%41x",
	} {
		a := e.do("GET", "/v1/policies/web:mirror", nil, map[string]string{"X-Original-URI": uri})
		got := rec.take()
		if a.code != 204 || len(got) != 1 || got[0].RawPath != want {
			t.Errorf("%s: %d %s, mirrored %+v, want raw_path %q", uri, a.code, a.body, got, want)
		}
	}
}
