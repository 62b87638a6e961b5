package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TLSFiles names the API's certificate and key (PEM) and, optionally, the
// CA (PEM) that client certificates must chain to.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
	// Logger receives reloads and failed reloads; nil discards.
	Logger hclog.Logger
	// Now is the clock that paces the file checks; nil means time.Now.
	Now func() time.Time
}

// tlsCheckEvery bounds how often a handshake looks at the files: at most
// one stat of each per interval, so a rotation is picked up within it.
const tlsCheckEvery = time.Second

// ServerTLS returns the TLS configuration of the API: TLS 1.2 or newer,
// the certificate and key, and with a client CA, a certificate required
// from every client. The files are read now (an error stops the node) and
// read again, at the next handshake, after they change on disk, so a
// rotated certificate is served without a restart; a rotation that does
// not load is logged and the previous certificate stays.
//
// This is the user API's reloader; node-to-node TLS has its own in its
// branch, and the two are meant to become one package.
func ServerTLS(f TLSFiles) (*tls.Config, error) {
	if f.Logger == nil {
		f.Logger = hclog.NewNullLogger()
	}
	if f.Now == nil {
		f.Now = time.Now
	}
	r := &tlsReloader{files: f}
	if err := r.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: r.configForClient}, nil
}

// tlsReloader holds the loaded files and when they were last looked at.
type tlsReloader struct {
	files TLSFiles

	mu      sync.Mutex
	checked time.Time
	stamps  []fileStamp
	current *tls.Config
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

func (r *tlsReloader) paths() []string {
	p := []string{r.files.CertFile, r.files.KeyFile}
	if r.files.ClientCAFile != "" {
		p = append(p, r.files.ClientCAFile)
	}
	return p
}

func (r *tlsReloader) stamp() ([]fileStamp, error) {
	var out []fileStamp
	for _, p := range r.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, fileStamp{mod: fi.ModTime(), size: fi.Size()})
	}
	return out, nil
}

// load reads the files into a new per-connection configuration.
func (r *tlsReloader) load() error {
	stamps, err := r.stamp()
	if err != nil {
		return fmt.Errorf("api tls: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return fmt.Errorf("api tls: certificate %s, key %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if r.files.ClientCAFile != "" {
		pem, err := os.ReadFile(r.files.ClientCAFile)
		if err != nil {
			return fmt.Errorf("api tls: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("api tls: client CA " + r.files.ClientCAFile + " holds no PEM certificate")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	r.mu.Lock()
	r.stamps, r.current = stamps, cfg
	r.mu.Unlock()
	return nil
}

// configForClient is tls.Config.GetConfigForClient: the current files'
// configuration, reloaded first when a file changed.
func (r *tlsReloader) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	now := r.files.Now()
	due := now.Sub(r.checked) >= tlsCheckEvery
	if due {
		r.checked = now
	}
	old, cur := r.stamps, r.current
	r.mu.Unlock()
	if !due {
		return cur, nil
	}
	stamps, err := r.stamp()
	if err != nil || sameStamps(old, stamps) {
		return cur, nil
	}
	if err := r.load(); err != nil {
		r.files.Logger.Error("new API certificate files do not load; serving the previous ones", "error", err)
		return cur, nil
	}
	r.files.Logger.Info("API certificate files reloaded", "cert", r.files.CertFile)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current, nil
}

func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}
