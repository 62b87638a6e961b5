package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// maxPEMBytes bounds each file read: a CA bundle and a chain are a few KB.
const maxPEMBytes = 1 << 20

// Files names a node's PEM files ([tls] in config.toml).
type Files struct {
	// CA holds the cluster CA certificate(s) every peer must chain to.
	CA string
	// Cert is this node's certificate (and intermediates); Key its
	// private key.
	Cert string
	Key  string
}

// Material is one loaded generation of a node's TLS files.
type Material struct {
	// Cert is the node's certificate and key, as TLS presents them.
	Cert tls.Certificate
	// Roots is the cluster CA pool peers are verified against.
	Roots *x509.CertPool
	// ID is the node id the certificate names.
	ID string
	// NotAfter is when the node certificate expires.
	NotAfter time.Time
}

// Load reads and checks f; see Parse.
func Load(f Files) (*Material, error) {
	var data [3][]byte
	for i, p := range []string{f.CA, f.Cert, f.Key} {
		b, err := readBounded(p)
		if err != nil {
			return nil, err
		}
		data[i] = b
	}
	m, err := Parse(data[0], data[1], data[2])
	if err != nil {
		return nil, fmt.Errorf("%s, %s, %s: %w", f.CA, f.Cert, f.Key, err)
	}
	return m, nil
}

func readBounded(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; not a PEM certificate or key", path, maxPEMBytes)
	}
	return b, nil
}

// Parse checks a node's PEM material the way peers will: the CA parses,
// the key matches the certificate, the certificate chains to the CA for
// both server and client use, and it names exactly one node. A node that
// would be refused by every peer is better refused at start.
func Parse(caPEM, certPEM, keyPEM []byte) (*Material, error) {
	roots, err := parseRoots(caPEM)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("node certificate and key: %w", err)
	}
	chain := make([]*x509.Certificate, 0, len(cert.Certificate))
	for _, der := range cert.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("node certificate: %w", err)
		}
		chain = append(chain, c)
	}
	cert.Leaf = chain[0]
	var id string
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if id, err = verifyPeer(roots, chain, usage, time.Now()); err != nil {
			return nil, fmt.Errorf("node certificate: %w", err)
		}
	}
	return &Material{Cert: cert, Roots: roots, ID: id, NotAfter: chain[0].NotAfter}, nil
}

// parseRoots parses every CERTIFICATE block of caPEM; anything else in the
// file is an error, so a key pasted by mistake is noticed.
func parseRoots(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("CA file: a %q block where only certificates belong", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("CA file: %q is not a CA certificate", c.Subject.String())
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("CA file: no PEM certificate")
	}
	return pool, nil
}
