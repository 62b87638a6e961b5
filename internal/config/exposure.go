package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// validate checks that [tls] names all three files or none, and a
// denylist only with them.
func (t *TLS) validate(e *errs) {
	if !t.Enabled() {
		if strings.TrimSpace(t.DenylistFile) != "" {
			e.add("tls.denylist_file", "needs ca_file, cert_file and key_file: certificates are denied during the node-to-node TLS handshake")
		}
		return
	}
	for _, f := range []struct{ key, val string }{
		{"tls.ca_file", t.CAFile}, {"tls.cert_file", t.CertFile}, {"tls.key_file", t.KeyFile},
	} {
		if strings.TrimSpace(f.val) == "" {
			e.add(f.key, "must be set with the other [tls] files (ca_file, cert_file, key_file)")
		}
	}
}

// ErrExposed is a node that would listen beyond loopback without the
// protection that makes that safe.
var ErrExposed = errors.New("refusing to listen beyond loopback without authentication")

// CheckExposure is the one secure-by-default rule a node applies at start:
// it returns why this configuration must not run, or the warnings to log
// when it may. A node whose raft or HTTP address is not loopback needs
// node TLS ([tls]), or anyone who reaches the raft port can rewrite the
// replicated policy, and an API with credentials (apiCredentials is how
// many tokens resolved), or anyone who reaches the API can. On loopback
// (`make run`) it may run without either, with a warning for each.
func (c *Config) CheckExposure(apiCredentials int) (warnings []string, err error) {
	// Both reasons are named at once, so an operator fixes the config
	// in one go rather than meeting the second refusal after the first.
	var reasons []string
	if exposed := c.exposedAddrs(); len(exposed) > 0 && !c.TLS.Enabled() {
		reasons = append(reasons, fmt.Sprintf("%s %s not loopback, and [tls] is not configured: anyone who reaches the raft port could replace the policy. Create certificates with `reconciler certs` and set [tls] (docs/cluster.md)",
			strings.Join(exposed, ", "), isAre(len(exposed))))
	}
	if apiCredentials == 0 && !isLoopback(c.Node.HTTPAddr) {
		reasons = append(reasons, fmt.Sprintf("node.http_addr %q is not a loopback address and the API has no credentials: "+
			"set the variable [api] token_env names or add [[api.tokens]] (docs/configuration.md), or bind 127.0.0.1",
			c.Node.HTTPAddr))
	}
	if len(reasons) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrExposed, strings.Join(reasons, "; "))
	}
	if !c.TLS.Enabled() {
		warnings = append(warnings, "node-to-node traffic is not authenticated (no [tls]); "+
			"fine on loopback only, see docs/cluster.md to enable it")
	}
	if apiCredentials == 0 {
		warnings = append(warnings, "the API has no credentials: every local process may change the policy "+
			"(development mode; set [api] token_env or [[api.tokens]])")
	}
	return warnings, nil
}

// exposedAddrs names the listen and advertised addresses that are not
// loopback.
func (c *Config) exposedAddrs() []string {
	var out []string
	for _, a := range []struct{ key, addr string }{
		{"node.http_addr", c.Node.HTTPAddr}, {"node.raft_addr", c.Node.RaftAddr},
		{"node.http_advertise_addr", c.Node.HTTPAdvertiseAddr}, {"node.raft_advertise_addr", c.Node.RaftAdvertiseAddr},
	} {
		if a.addr != "" && !isLoopback(a.addr) {
			out = append(out, fmt.Sprintf("%s (%s)", a.key, a.addr))
		}
	}
	return out
}

// isLoopback reports whether a host:port binds or names loopback only:
// 127.0.0.0/8, ::1 or "localhost". A wildcard or another name is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
