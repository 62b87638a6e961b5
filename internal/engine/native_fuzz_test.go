package engine

import (
	"encoding/json"
	"sync"
	"testing"

	"cel.dev/cel-go/common/types"

	"github.com/policyrollout/reconciler/internal/policy"
)

var (
	nativeFuzzOnce  sync.Once
	nativeFuzzRules []*compiledRule
	nativeFuzzErr   error
)

// nativeFuzzPlans compiles the example policies and nativeShapes once and
// returns their rules that have a native plan.
func nativeFuzzPlans(t testing.TB) []*compiledRule {
	nativeFuzzOnce.Do(func() {
		files := exampleTreeWith(t, nil)
		files["native-shapes/policy.toml"] = []byte(nativeShapes)
		bundle, errs := CompileTree(files, policy.LoadOptions{}, DefaultOptions())
		if errs != nil {
			nativeFuzzErr = errs
			return
		}
		for _, name := range bundle.Names() {
			cp, _ := bundle.Policy(name)
			for i := range cp.rules {
				if cp.rules[i].native != nil {
					nativeFuzzRules = append(nativeFuzzRules, &cp.rules[i])
				}
			}
		}
	})
	if nativeFuzzErr != nil {
		t.Fatal(nativeFuzzErr)
	}
	if len(nativeFuzzRules) == 0 {
		t.Fatal("no rule has a native plan")
	}
	return nativeFuzzRules
}

// FuzzNativeAgreesWithCEL: for any request, a rule's native plan either
// leaves the rule to CEL or answers what CEL answers (a CEL error is never
// answered natively). The fuzzer varies the fields the rules read, each
// header the example and nativeShapes name taking the fuzzed values, so
// every input is a request the decoder accepts.
func FuzzNativeAgreesWithCEL(f *testing.F) {
	f.Add("GET", "/", "shop.example.com", "KP", "curl/8", "198.18.10.46", "a")
	f.Add("POST", "/admin/x", "old.example.com", "", "ÄÖ", "::ffff:192.0.2.1", "")
	f.Add("get", "/wp-login.php", "Ä.example", "x", "sqlmap", "not-an-ip", "1")
	f.Add("PUT", "/api/v1/users?x=1", "admin.example.com", "RU", "", "2001:db8::1", "x y")
	f.Fuzz(func(t *testing.T, method, path, host, h1, h2, ip, q string) {
		hdr := map[string]string{}
		for i, name := range []string{"cf-ipcountry", "user-agent", "x-a", "x-b", "x-c", "x", "x-real-ip", "x-breakglass-ticket"} {
			if v := []string{h1, h2}[i%2]; v != "" {
				hdr[name] = v
			}
		}
		body, err := json.Marshal(map[string]any{"method": method, "path": path, "host": host, "scheme": "https",
			"headers": hdr, "source_ip": ip, "query": map[string][]string{"q": {q}}, "time": "2025-05-31T12:10:27Z"})
		if err != nil {
			return
		}
		req, err := DecodeRequest(body)
		if err != nil {
			return
		}
		for _, r := range nativeFuzzPlans(t) {
			v, ok := r.native(req)
			if !ok {
				continue
			}
			st := newEvalState(req)
			out, _, err := r.tracked.Eval(st)
			st.release()
			if err != nil {
				t.Fatalf("rule %s: native %v where CEL fails: %v (request %s)", r.name, v, err, body)
			}
			if (out == types.True) != v {
				t.Fatalf("rule %s: native %v, CEL %v (request %s)", r.name, v, out, body)
			}
		}
	})
}
