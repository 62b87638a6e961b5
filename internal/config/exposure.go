package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// validate checks that [tls] names all three files or none.
func (t *TLS) validate(e *errs) {
	if !t.Enabled() {
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

// CheckExposure is the secure-by-default rule a node applies at start: it
// returns the reasons, if any, why this configuration must not run, and
// the warnings to log when it may. A node whose raft or HTTP address is
// not loopback needs node TLS ([tls]): without it anyone who reaches the
// raft port can rewrite the replicated policy. On loopback (`make run`)
// it may run without, with a warning. Further checks (API credentials)
// belong here too, so there is one place that decides.
func (c *Config) CheckExposure() (warnings []string, err error) {
	exposed := c.exposedAddrs()
	if len(exposed) == 0 {
		if !c.TLS.Enabled() {
			warnings = append(warnings, "node-to-node traffic is not authenticated (no [tls]); "+
				"fine on loopback only, see docs/cluster.md to enable it")
		}
		return warnings, nil
	}
	if !c.TLS.Enabled() {
		return warnings, fmt.Errorf("%w: %s %s not loopback, and [tls] is not configured: anyone who reaches the raft port could replace the policy. Create certificates with `reconciler certs` and set [tls] (docs/cluster.md)",
			ErrExposed, strings.Join(exposed, ", "), isAre(len(exposed)))
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
