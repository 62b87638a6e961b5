package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Config configures a Node.
type Config struct {
	Files Files
	// DenyFile, if set, lists serial numbers of certificates refused
	// although they chain to the CA (ParseDenylist); reloaded like Files.
	DenyFile string
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
	now  func() time.Time
	mat  *watched[*Material]
	deny *watched[denylist] // nil without Config.DenyFile
}

// NewNode loads cfg.Files; an error if they are not a valid node identity.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := cfg.Files
	w, err := newWatched(watchConfig[*Material]{
		What:     "node TLS",
		Paths:    []string{f.CA, f.Cert, f.Key},
		Load:     func() (*Material, error) { return Load(f) },
		Accept:   sameNode,
		Logger:   cfg.Logger,
		Interval: cfg.CheckInterval,
		Now:      cfg.Now,
		Loaded:   func(m *Material) []any { return []any{"node_id", m.ID, "not_after", m.NotAfter} },
	})
	if err != nil {
		return nil, err
	}
	n := &Node{now: cfg.Now, mat: w}
	if cfg.DenyFile != "" {
		n.deny, err = newWatched(watchConfig[denylist]{
			What:     "certificate denylist",
			Paths:    []string{cfg.DenyFile},
			Load:     func() (denylist, error) { return loadDenylist(cfg.DenyFile) },
			Logger:   cfg.Logger,
			Interval: cfg.CheckInterval,
			Now:      cfg.Now,
			Loaded:   func(d denylist) []any { return []any{"denied", len(d)} },
		})
		if err != nil {
			return nil, fmt.Errorf("tls denylist: %w", err)
		}
	}
	return n, nil
}

// checkDenied refuses a peer chain that holds a denied certificate.
func (n *Node) checkDenied(certs []*x509.Certificate) error {
	if n.deny == nil {
		return nil
	}
	return n.deny.Current().check(certs)
}

// Denied reports whether a connection's peer presented a denied
// certificate, by the denylist of now (a connection opened before the
// certificate was denied).
func (n *Node) Denied(cs *tls.ConnectionState) bool {
	return n.checkDenied(cs.PeerCertificates) != nil
}

func sameNode(cur, next *Material) error {
	if next.ID != cur.ID {
		return fmt.Errorf("the new certificate names node %q, this node is %q", next.ID, cur.ID)
	}
	return nil
}

// ID is the node id the certificate names.
func (n *Node) ID() string { return n.Current().ID }

// Current returns the material to use now, reloading it first when a file
// changed since the last look (at most once per CheckInterval).
func (n *Node) Current() *Material { return n.mat.Current() }

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
					if _, err := PeerID(&cs); err != nil {
						return err
					}
					return n.checkDenied(cs.PeerCertificates)
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
			id, err := verifyPeer(n.Current().Roots, cs.PeerCertificates, x509.ExtKeyUsageServerAuth, n.now())
			if err != nil {
				return err
			}
			if wantID != "" && id != wantID {
				return fmt.Errorf("the node at this address is %q, not %q", id, wantID)
			}
			return n.checkDenied(cs.PeerCertificates)
		},
	}
}
