package config

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/policyrollout/reconciler/internal/auth"
)

// APIToken is one [[api.tokens]] table: a named bearer token with one
// role, read from an environment variable or a file (never from the
// configuration itself).
type APIToken struct {
	// Name identifies the token in the audit log and in errors.
	Name string `toml:"name"`
	// Role is "reader", "writer" or "admin".
	Role string `toml:"role"`
	// Env names the environment variable holding the token; File the file
	// holding it (surrounding whitespace ignored). Exactly one is set.
	Env  string `toml:"env"`
	File string `toml:"file"`
}

// maxTokenFile bounds what is read of a token file.
const maxTokenFile = 8192

func (a *API) validateTrust(e *errs) {
	names := map[string]bool{}
	for i, t := range a.Tokens {
		key := fmt.Sprintf("api.tokens[%d]", i)
		if !isName(t.Name) {
			e.add(key+".name", "%q must be 1-63 letters, digits, '.', '_' or '-'", t.Name)
		} else if names[t.Name] {
			e.add(key+".name", "%q is used by another token", t.Name)
		}
		names[t.Name] = true
		if _, err := auth.ParseRole(t.Role); err != nil {
			e.add(key+".role", "%v", err)
		}
		if (t.Env == "") == (t.File == "") {
			e.add(key, "set exactly one of env (a variable name) and file (a path)")
		}
		checkEnvName(e, key+".env", t.Env)
	}
	if a.DecisionRole != "" {
		if _, err := auth.ParseRole(a.DecisionRole); err != nil {
			e.add("api.decision_role", "%v (or \"\" for open decisions)", err)
		}
	}
	for i, o := range a.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			e.add(fmt.Sprintf("api.allowed_origins[%d]", i), "%v", err)
		}
	}
	if (a.TLSCertFile == "") != (a.TLSKeyFile == "") {
		e.add("api.tls_cert_file", "tls_cert_file and tls_key_file go together")
	}
	if a.ClientCAFile != "" && a.TLSCertFile == "" {
		e.add("api.client_ca_file", "needs tls_cert_file and tls_key_file: client certificates are checked during the TLS handshake")
	}
}

// checkOrigin accepts a browser origin: scheme "http" or "https", a host,
// an optional port, and nothing else (no path, query or user).
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must be an origin: http(s)://host[:port]", o)
	}
	return nil
}

// resolvePaths makes the [api] files relative to the config's directory.
func (a *API) resolvePaths(baseDir string) {
	for i := range a.Tokens {
		a.Tokens[i].File = resolve(baseDir, a.Tokens[i].File)
	}
	a.TLSCertFile = resolve(baseDir, a.TLSCertFile)
	a.TLSKeyFile = resolve(baseDir, a.TLSKeyFile)
	a.ClientCAFile = resolve(baseDir, a.ClientCAFile)
}

// APICredentials reads the API's tokens: the admin token of token_env
// when its variable is set (named after the variable), then every
// [[api.tokens]] entry, which must resolve to a token (a named token
// whose variable is empty or whose file is missing stops the node rather
// than silently running without it). Errors never contain a token.
func (c *Config) APICredentials() ([]auth.Credential, error) {
	var creds []auth.Credential
	if v := c.Secret(c.API.TokenEnv); v != "" {
		creds = append(creds, auth.Credential{Name: c.API.TokenEnv, Role: auth.RoleAdmin, Secret: v})
	}
	var errs []error
	for i, t := range c.API.Tokens {
		role, err := auth.ParseRole(t.Role)
		if err != nil {
			errs = append(errs, fmt.Errorf("api.tokens[%d]: %w", i, err))
			continue
		}
		secret, err := c.readToken(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("api.tokens[%d] (%s): %w", i, t.Name, err))
			continue
		}
		creds = append(creds, auth.Credential{Name: t.Name, Role: role, Secret: secret})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := auth.NewSet(creds); err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	return creds, nil
}

func (c *Config) readToken(t APIToken) (string, error) {
	if t.Env != "" {
		v := strings.TrimSpace(c.Secret(t.Env))
		if v == "" {
			return "", fmt.Errorf("environment variable %s is unset or empty", t.Env)
		}
		return v, nil
	}
	f, err := os.Open(t.File)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", t.File, err)
	}
	v := strings.TrimSpace(string(data))
	if v == "" || len(data) > maxTokenFile {
		return "", fmt.Errorf("token file %s must hold one token of at most %d bytes", t.File, maxTokenFile)
	}
	return v, nil
}
