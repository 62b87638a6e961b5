package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// APIFiles names the user API's certificate and key (PEM) and, optionally,
// the CA bundle (PEM) that client certificates must chain to ([api]).
type APIFiles struct {
	CertFile, KeyFile, ClientCAFile string
	// Logger receives reloads and failed reloads; nil discards.
	Logger hclog.Logger
	// CheckInterval defaults to DefaultCheckInterval.
	CheckInterval time.Duration
	// Now is the clock that paces the file checks; nil means time.Now.
	Now func() time.Time
}

// APIServer returns the TLS configuration of the user API: TLS 1.2 or
// newer (browsers and operators' tools, unlike nodes, may not speak 1.3),
// the certificate and key, and with a client CA, a certificate required
// from every client. The files are read now (an error stops the node) and
// again, at the next handshake, after they change on disk, so a rotated
// certificate is served without a restart; a rotation that does not load
// is logged and the previous certificate stays.
func APIServer(f APIFiles) (*tls.Config, error) {
	paths := []string{f.CertFile, f.KeyFile}
	if f.ClientCAFile != "" {
		paths = append(paths, f.ClientCAFile)
	}
	w, err := newWatched(watchConfig[*tls.Config]{
		What:     "API TLS",
		Paths:    paths,
		Load:     f.load,
		Logger:   f.Logger,
		Interval: f.CheckInterval,
		Now:      f.Now,
		Loaded:   func(*tls.Config) []any { return []any{"cert", f.CertFile} },
	})
	if err != nil {
		return nil, fmt.Errorf("api tls: %w", err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return w.Current(), nil
		},
	}, nil
}

// load reads the files, each bounded, into a per-connection configuration.
func (f APIFiles) load() (*tls.Config, error) {
	certPEM, err := readBounded(f.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readBounded(f.KeyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate %s, key %s: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.ClientCAFile == "" {
		return cfg, nil
	}
	caPEM, err := readBounded(f.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	// Any certificate in the bundle is trusted, CA or not, as before: an
	// operator may pin a self-signed client certificate this way (the
	// cluster CA file of nodes is stricter, see parseRoots).
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("client CA %s holds no PEM certificate", f.ClientCAFile)
	}
	cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	return cfg, nil
}
