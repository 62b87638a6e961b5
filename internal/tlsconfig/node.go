package tlsconfig

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

// DefaultCheckInterval is how often, at most, a node looks at its files'
// modification times; it looks only when a handshake needs the material,
// so an idle node does no I/O.
const DefaultCheckInterval = time.Second

// Config configures a Node.
type Config struct {
	Files Files
	// Logger reports reloads and refused reloads; nil discards.
	Logger hclog.Logger
	// CheckInterval defaults to DefaultCheckInterval; negative checks on
	// every handshake.
	CheckInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Node holds a node's current TLS material and reloads it when the files
// change (certificate rotation without a restart). A reload that fails, or
// whose certificate names another node, keeps the previous material and
// logs why: the files may be half written, and a node must not change its
// identity while it runs.
type Node struct {
	cfg Config

	mu      sync.Mutex
	cur     *Material
	stamps  [3]stamp
	checked time.Time
	refused [3]stamp // the stamps of the last refused reload, logged once
}

type stamp struct {
	mod  time.Time
	size int64
}

// NewNode loads cfg.Files; an error if they are not a valid node identity.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	n := &Node{cfg: cfg}
	stamps, err := n.stat()
	if err != nil {
		return nil, err
	}
	m, err := Load(cfg.Files)
	if err != nil {
		return nil, err
	}
	n.cur, n.stamps, n.checked = m, stamps, cfg.Now()
	return n, nil
}

// ID is the node id the certificate names.
func (n *Node) ID() string { return n.Current().ID }

// Current returns the material to use now, reloading it first when a file
// changed since the last look (at most once per CheckInterval).
func (n *Node) Current() *Material {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.cfg.Now()
	if n.cfg.CheckInterval > 0 && now.Sub(n.checked) < n.cfg.CheckInterval {
		return n.cur
	}
	n.checked = now
	stamps, err := n.stat()
	if err != nil || stamps == n.stamps {
		if err != nil && stamps != n.refused {
			n.refused = stamps
			n.cfg.Logger.Warn("cannot read the TLS files; keeping the loaded certificate", "error", err)
		}
		return n.cur
	}
	m, err := Load(n.cfg.Files)
	if err == nil && m.ID != n.cur.ID {
		err = fmt.Errorf("the new certificate names node %q, this node is %q", m.ID, n.cur.ID)
	}
	if err != nil {
		if stamps != n.refused {
			n.refused = stamps
			n.cfg.Logger.Warn("TLS files changed but do not load; keeping the loaded certificate", "error", err)
		}
		return n.cur
	}
	n.cur, n.stamps = m, stamps
	n.cfg.Logger.Info("reloaded the TLS certificate", "node_id", m.ID, "not_after", m.NotAfter)
	return n.cur
}

func (n *Node) stat() ([3]stamp, error) {
	var out [3]stamp
	var errs []error
	for i, p := range []string{n.cfg.Files.CA, n.cfg.Files.Cert, n.cfg.Files.Key} {
		fi, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[i] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, errors.Join(errs...)
}

// ServerConfig is the TLS config of a node-to-node listener: TLS 1.3, the
// current certificate, and a client certificate that chains to the
// cluster CA and names a node, required. protos are the ALPN protocols
// offered (see Mux).
func (n *Node) ServerConfig(protos ...string) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		NextProtos:             protos,
		SessionTicketsDisabled: true,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := n.Current()
			return &tls.Config{
				MinVersion: tls.VersionTLS13,
				NextProtos: protos,
				// Every connection proves its certificate against the
				// current CA: a resumed session would skip that after a
				// rotation. Node connections are long-lived anyway.
				SessionTicketsDisabled: true,
				Certificates:           []tls.Certificate{m.Cert},
				ClientAuth:             tls.RequireAndVerifyClientCert,
				ClientCAs:              m.Roots,
				VerifyConnection: func(cs tls.ConnectionState) error {
					_, err := PeerID(&cs)
					return err
				},
			}, nil
		},
	}
}

// ClientConfig is the TLS config for dialling another node with protocol
// proto: it presents the current certificate and accepts a server whose
// certificate chains to the current cluster CA and names a node, and, when
// wantID is not empty, names that node. The chain is checked in
// VerifyConnection rather than through RootCAs so that a reloaded CA
// applies to connections made by long-lived clients too.
func (n *Node) ClientConfig(proto, wantID string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{proto},
		// Verified in VerifyConnection against the current CA; a node's
		// name is its node id, not a host name.
		InsecureSkipVerify: true, //nolint:gosec // see VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := n.Current()
			return &m.Cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := verifyPeer(n.Current().Roots, cs.PeerCertificates, x509.ExtKeyUsageServerAuth, n.cfg.Now())
			if err != nil {
				return err
			}
			if wantID != "" && id != wantID {
				return fmt.Errorf("the node at this address is %q, not %q", id, wantID)
			}
			return nil
		},
	}
}
