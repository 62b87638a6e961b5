package api

import (
	"crypto/tls"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// TLSFiles names the API's certificate, key and optional client CA; see
// tlsconfig.APIFiles.
type TLSFiles = tlsconfig.APIFiles

// tlsCheckEvery bounds how often a handshake looks at the files: at most
// one stat of each per interval, so a rotation is picked up within it.
const tlsCheckEvery = tlsconfig.DefaultCheckInterval

// ServerTLS returns the TLS configuration of the API (TLS 1.2 or newer),
// reloading rotated files: the one reloading mechanism of the module,
// shared with node-to-node TLS, is tlsconfig's.
func ServerTLS(f TLSFiles) (*tls.Config, error) { return tlsconfig.APIServer(f) }
