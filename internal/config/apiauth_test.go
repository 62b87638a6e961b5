package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/auth"
)

// apiTrustExample is an [api] section with every trust key.
const apiTrustExample = `
[api]
token_env = "RT_ADMIN"
decision_role = "reader"
allowed_origins = ["https://console.example", "http://localhost:3000"]
tls_cert_file = "tls/api.crt"
tls_key_file = "tls/api.key"
client_ca_file = "tls/clients.crt"

[[api.tokens]]
name = "ci"
role = "writer"
env = "RT_CI"

[[api.tokens]]
name = "dashboard"
role = "reader"
file = "secrets/dashboard.token"
`

func TestAPICredentials(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets", "dashboard.token"), []byte("  reader-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RT_ADMIN", "admin-secret-1")
	t.Setenv("RT_CI", "writer-secret-1")
	c, err := Parse([]byte(apiTrustExample), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.API.TLSCertFile != filepath.Join(dir, "tls/api.crt") || c.API.Tokens[1].File != filepath.Join(dir, "secrets/dashboard.token") {
		t.Errorf("paths not resolved against the config's directory: %+v", c.API)
	}
	creds, err := c.APICredentials()
	if err != nil {
		t.Fatal(err)
	}
	want := []auth.Credential{
		{Name: "RT_ADMIN", Role: auth.RoleAdmin, Secret: "admin-secret-1"},
		{Name: "ci", Role: auth.RoleWriter, Secret: "writer-secret-1"},
		{Name: "dashboard", Role: auth.RoleReader, Secret: "reader-secret-1"},
	}
	if len(creds) != len(want) {
		t.Fatalf("creds = %d, want %d", len(creds), len(want))
	}
	for i := range want {
		if creds[i] != want[i] {
			t.Errorf("creds[%d] = %s/%s, want %s/%s", i, creds[i].Name, creds[i].Role, want[i].Name, want[i].Role)
		}
	}
	if got := c.Secret("RT_CI"); got != "writer-secret-1" {
		t.Errorf("Secret of a token's env = %q", got)
	}

	// A named token that does not resolve stops the node; the error names
	// the token, never a secret.
	t.Setenv("RT_CI", "")
	if _, err := c.APICredentials(); err == nil || !strings.Contains(err.Error(), "ci") || !strings.Contains(err.Error(), "RT_CI") {
		t.Errorf("unset token variable: %v", err)
	}
	t.Setenv("RT_CI", "admin-secret-1")
	if _, err := c.APICredentials(); err == nil || strings.Contains(err.Error(), "admin-secret-1") {
		t.Errorf("reused token: %v", err)
	}
	t.Setenv("RT_CI", "writer-secret-1")
	if err := os.Remove(filepath.Join(dir, "secrets", "dashboard.token")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.APICredentials(); err == nil || !strings.Contains(err.Error(), "dashboard") {
		t.Errorf("missing token file: %v", err)
	}
}

func TestAPITrustValidation(t *testing.T) {
	for _, tc := range []struct{ toml, key string }{
		{"[[api.tokens]]\nname = \"a\"\nrole = \"root\"\nenv = \"A\"\n", "api.tokens[0].role"},
		{"[[api.tokens]]\nname = \"a\"\nrole = \"reader\"\n", "api.tokens[0]: set exactly one"},
		{"[[api.tokens]]\nname = \"a\"\nrole = \"reader\"\nenv = \"A\"\nfile = \"f\"\n", "api.tokens[0]: set exactly one"},
		{"[[api.tokens]]\nname = \"a b\"\nrole = \"reader\"\nenv = \"A\"\n", "api.tokens[0].name"},
		{"[[api.tokens]]\nname = \"a\"\nrole = \"reader\"\nenv = \"A\"\n[[api.tokens]]\nname = \"a\"\nrole = \"admin\"\nenv = \"B\"\n", "api.tokens[1].name"},
		{"[[api.tokens]]\nname = \"a\"\nrole = \"reader\"\nenv = \"1A\"\n", "api.tokens[0].env"},
		{"[api]\ndecision_role = \"everyone\"\n", "api.decision_role"},
		{"[api]\nallowed_origins = [\"*\"]\n", "api.allowed_origins[0]"},
		{"[api]\nallowed_origins = [\"https://x.example/app\"]\n", "api.allowed_origins[0]"},
		{"[api]\nallowed_origins = [\"ftp://x.example\"]\n", "api.allowed_origins[0]"},
		{"[api]\ntls_cert_file = \"c\"\n", "api.tls_cert_file"},
		{"[api]\nclient_ca_file = \"ca\"\n", "api.client_ca_file"},
		{"[[api.tokens]]\nname = \"a\"\nrole = \"reader\"\nenv = \"A\"\nsecret = \"x\"\n", "api.tokens.secret"},
	} {
		_, err := Parse([]byte(tc.toml), "")
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v, want one naming %s", tc.toml, err, tc.key)
		}
	}
}

// TestCheckExposureAPICredentials: with node TLS in place, an API beyond
// loopback still needs credentials; on loopback their absence is the
// development mode, announced by a warning.
func TestCheckExposureAPICredentials(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		creds   int
		dev     bool
		exposed bool
	}{
		{"127.0.0.1:8181", 0, true, false},
		{"localhost:8181", 0, true, false},
		{"[::1]:8181", 0, true, false},
		{"127.0.0.1:8181", 1, false, false},
		{"0.0.0.0:8181", 0, false, true},
		{":8181", 0, false, true},
		{"10.0.0.5:8181", 0, false, true},
		{"10.0.0.5:8181", 2, false, false},
	} {
		c := Default()
		c.Node.HTTPAddr = tc.addr
		c.TLS = TLS{CAFile: "ca.pem", CertFile: "n.pem", KeyFile: "n-key.pem"}
		warnings, err := c.CheckExposure(tc.creds)
		dev := len(warnings) > 0 && strings.Contains(strings.Join(warnings, "\n"), "the API has no credentials")
		if dev != tc.dev || errors.Is(err, ErrExposed) != tc.exposed {
			t.Errorf("%s with %d credentials: dev %v, err %v", tc.addr, tc.creds, dev, err)
		}
		if tc.exposed && !strings.Contains(err.Error(), tc.addr) {
			t.Errorf("the error does not name the address: %v", err)
		}
	}
}

func TestGitVerifyValidation(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[git]\nverify = \"signed\"\n", "git.verify: \"signed\" needs trusted keys"},
		{"[git]\nverify = \"maybe\"\n", "git.verify: \"maybe\" must be"},
	} {
		if _, err := Parse([]byte(tc.toml), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v", tc.toml, err)
		}
	}
	c, err := Parse([]byte("[git]\nverify = \"signed\"\nssh_allowed_signers_file = \"keys/allowed\"\n"), "/etc/reconciler")
	if err != nil || c.Git.SSHAllowedSignersFile != "/etc/reconciler/keys/allowed" {
		t.Errorf("%+v %v", c, err)
	}
}
