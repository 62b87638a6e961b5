package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/sandbox"
	"github.com/policyrollout/reconciler/test/harness"
)

// heavyExperiment is the body of an experiment of policy web within
// every budget of a policy (480 KB, 240,000 of its 250,000 expression
// nodes) whose policy takes about 100 MiB to compile: 60 rules, each
// testing the size of a list literal of 4,000 elements.
func heavyExperiment() string {
	list := "[" + strings.Repeat("1,", 3_999) + "1]"
	rules := make([]map[string]any, 60)
	for r := range rules {
		rules[r] = map[string]any{"name": fmt.Sprintf("r%d", r), "priority": r + 1, "action": "deny",
			"match": fmt.Sprintf("request.path == '/%d' && size(%s) > 0", r, list)}
	}
	b, _ := json.Marshal(map[string]any{"policy": map[string]any{"default_action": "allow", "rules": rules}})
	return string(b)
}

// TestAPIPolicyValidatedInTheChild (issue 16): `serve` compiles the
// policy of an experiment POSTed to the API in the validate-worker child
// with [validation]'s limits. The heaviest policy the per-policy budgets
// admit (240,000 expression nodes) grows the child by 32-48 MiB, so at
// the smallest limit the configuration takes (64 MiB) it compiles there:
// the budgets, not the child's limit, are what a policy meets first. (It
// used to be refused here only because RLIMIT_AS counted the runtime's
// 64 MiB arena reservations; sandbox TestCheckPolicyKilledByMemoryLimit
// covers a child ended by its limit.) The client's side allocates only
// the request, and the node then still decides and accepts a small
// experiment.
func TestAPIPolicyValidatedInTheChild(t *testing.T) {
	path := writeServeConfig(t, "127.0.0.1:0", "json")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "\n[validation]\nmemory_limit_bytes = 67108864\ntimeout = \"45s\"\n\n[api]\nmax_body_bytes = 4194304\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	base, _ := startServeWith(t, path, harness.Binary(t))
	decide(t, base)

	body := heavyExperiment()
	cl := harness.NewClient(harness.ReadyTimeout, 0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, answer, err := cl.Do(http.MethodPost, base+"/v1/policies/web/experiments?experimentId=heavy", body)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("heavy experiment within every budget, at the 64 MiB limit: %d %.400s", code, answer)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of policy: %d; the client allocated %d MiB", len(body), code, allocated>>20)
	if allocated > 96<<20 {
		t.Fatalf("the node allocated %d MiB while the child compiled", allocated>>20)
	}

	decide(t, base)
	code, answer, err = cl.Do(http.MethodPost, base+"/v1/policies/web/experiments?experimentId=light",
		`{"policy":{"default_action":"deny","rules":[{"name":"a","priority":1,"action":"allow","match":"request.path == '/a'"}]}}`)
	if err != nil || code != http.StatusOK {
		t.Fatalf("a small experiment after the heavy one: %d %s %v", code, answer, err)
	}
}

// TestValidationDefaultsAreTheSandboxes: [validation]'s defaults are the
// limits sandbox.Runner applies when given none.
func TestValidationDefaultsAreTheSandboxes(t *testing.T) {
	v := config.Default().Validation
	if v.MemoryLimitBytes != sandbox.DefaultMemoryLimit || v.Timeout.Duration != sandbox.DefaultTimeout {
		t.Fatalf("[validation] defaults %+v, sandbox's %d and %s", v, sandbox.DefaultMemoryLimit, sandbox.DefaultTimeout)
	}
}
