package api

import (
	"os"
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
