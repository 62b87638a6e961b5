package config

import (
	"strings"
	"testing"
)

func TestFailureModes(t *testing.T) {
	if m := Default().API.FailureMode; m != "deny" {
		t.Errorf("default failure_mode = %q, want deny", m)
	}
	c, err := Parse([]byte("[api]\nfailure_mode = \"allow\"\n[api.failure_modes]\nweb = \"deny\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.API.FailureMode != "allow" || c.API.FailureModes["web"] != "deny" || c.API.GRPCAddr != "" {
		t.Errorf("api = %+v", c.API)
	}
	for in, want := range map[string]string{
		"[api]\nfailure_mode = \"open\"\n":             `api.failure_mode: "open" must be "deny" or "allow"`,
		"[api.failure_modes]\nweb = \"ALLOW\"\n":       `api.failure_modes.web: "ALLOW" must be "deny" or "allow"`,
		"[api.failure_modes]\n\"Web x\" = \"allow\"\n": `api.failure_modes.Web x: "Web x" must be a policy name`,
		"[api]\ngrpc_addr = \"nope\"\n":                `api.grpc_addr`,
	} {
		if _, err := Parse([]byte(in), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

// TestGRPCRefusesDecisionRole: decisions closed by a role must not stay
// open on the gRPC port, which checks no role.
func TestGRPCRefusesDecisionRole(t *testing.T) {
	_, err := Parse([]byte("[api]\ngrpc_addr = \"127.0.0.1:9191\"\ndecision_role = \"reader\"\n"), "/base")
	if err == nil || !strings.Contains(err.Error(), "api.grpc_addr") || !strings.Contains(err.Error(), "decision_role") {
		t.Fatalf("grpc_addr with decision_role: %v", err)
	}
	if _, err := Parse([]byte("[api]\ngrpc_addr = \"127.0.0.1:9191\"\n"), "/base"); err != nil {
		t.Fatalf("grpc_addr alone: %v", err)
	}
}
