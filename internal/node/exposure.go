package node

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/logging"
)

// minTokenLen is the token length below which the node warns.
const minTokenLen = 16

// checkExposure reads the API's credentials and refuses to start a node
// that others could reach without them (config.CheckExposure). On
// loopback without credentials it warns that anyone on this machine, any
// local process, may change the policy.
func checkExposure(cfg *config.Config, log hclog.Logger) ([]auth.Credential, error) {
	creds, err := cfg.APICredentials()
	if err != nil {
		return nil, err
	}
	warnings, err := cfg.CheckExposure(len(creds))
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn(w, "http_addr", cfg.Node.HTTPAddr)
	}
	for _, c := range creds {
		if len(c.Secret) < minTokenLen {
			log.Warn("an API token is short enough to guess: use at least 16 random characters (openssl rand -base64 32)",
				"token", c.Name, "role", c.Role.String())
		}
	}
	switch {
	case cfg.TLS.Enabled() && len(creds) == 0:
		log.Warn("[tls] is set but the API has no credentials: the node-to-node port admits a user's request only with the user's own token, so a write sent to a follower is refused by the leader; send writes to the leader or configure [api] token_env or [[api.tokens]]")
	case !cfg.TLS.Enabled() && len(creds) > 0 && cfg.Secret(cfg.API.TokenEnv) == "":
		// With [tls] nodes prove who they are with their certificates.
		log.Warn("the API has tokens but [api] token_env names no set variable: other nodes of a cluster cannot authenticate their heartbeats, reports and joins to this one",
			"token_env", cfg.API.TokenEnv)
	}
	return creds, nil
}

// serveTLS wraps the API listener ln in TLS when [api] names a
// certificate, and returns ln as it is otherwise.
func serveTLS(ln net.Listener, cfg *config.Config, logger hclog.Logger) (net.Listener, error) {
	a := cfg.API
	if a.TLSCertFile == "" {
		return ln, nil
	}
	tc, err := api.ServerTLS(api.TLSFiles{CertFile: a.TLSCertFile, KeyFile: a.TLSKeyFile, ClientCAFile: a.ClientCAFile,
		Logger: logger.Named(logging.API)})
	if err != nil {
		return ln, fmt.Errorf("node.http_addr: %w", err)
	}
	if !cfg.TLS.Enabled() && (len(cfg.Node.Join) > 0 || !cfg.Node.Bootstrap) {
		// With [tls] every node-to-node call goes to the node port, never
		// to this listener.
		logger.Named(logging.Node).Warn("the API serves TLS but without [tls] nodes call each other's API over plain HTTP: a cluster needs node-to-node TLS ([tls])",
			"http_addr", cfg.Node.HTTPAddr)
	}
	return tls.NewListener(ln, tc), nil
}

// decisionRole parses [api] decision_role ("" leaves decisions open); the
// configuration was validated.
func decisionRole(s string) auth.Role {
	r, _ := auth.ParseRole(s)
	return r
}
