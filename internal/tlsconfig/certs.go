package tlsconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// Validity defaults of `reconciler certs`, as consul tls uses: a CA for
// five years, node certificates for one.
const (
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultNodeValidity = 365 * 24 * time.Hour
)

// PEM is a certificate and its private key, PEM-encoded.
type PEM struct {
	Cert, Key []byte
}

// NewCA creates a self-signed cluster CA (ECDSA P-256) valid for validity.
func NewCA(name string, validity time.Duration) (PEM, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, err
	}
	tmpl, err := template(pkix.Name{CommonName: name, Organization: []string{"reconciler"}}, validity)
	if err != nil {
		return PEM{}, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return PEM{}, fmt.Errorf("create CA certificate: %w", err)
	}
	return encode(der, key)
}

// NewNodeCert creates a certificate for node id signed by ca, for both
// server and client use: URI SAN NodeURI(id), DNS SAN id+DNSSuffix,
// localhost and 127.0.0.1, and every host (an IP address or a DNS name) in
// hosts.
func NewNodeCert(ca PEM, id string, hosts []string, validity time.Duration) (PEM, error) {
	if !validID(id) {
		return PEM{}, fmt.Errorf("node id %q must be 1-63 letters, digits, '.', '_' or '-'", id)
	}
	caCert, caKey, err := parseCA(ca)
	if err != nil {
		return PEM{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, err
	}
	tmpl, err := template(pkix.Name{CommonName: id + DNSSuffix, Organization: []string{"reconciler"}}, validity)
	if err != nil {
		return PEM{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.URIs = []*url.URL{NodeURI(id)}
	tmpl.DNSNames = []string{id + DNSSuffix, "localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return PEM{}, fmt.Errorf("create node certificate: %w", err)
	}
	return encode(der, key)
}

func template(subject pkix.Name, validity time.Duration) (*x509.Certificate, error) {
	if validity <= 0 {
		return nil, errors.New("validity must be above 0")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: subject,
		// Back-dated a little: a peer whose clock is slightly behind must
		// not refuse a certificate made a moment ago.
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(validity)}, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (PEM, error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return PEM{}, err
	}
	return PEM{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

func parseCA(ca PEM) (*x509.Certificate, any, error) {
	b, _ := pem.Decode(ca.Cert)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, errors.New("CA certificate: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, nil, errors.New("CA certificate: not a CA")
	}
	kb, _ := pem.Decode(ca.Key)
	if kb == nil {
		return nil, nil, errors.New("CA key: no PEM key")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		k8, err8 := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err8 != nil {
			return nil, nil, fmt.Errorf("CA key: %w", err)
		}
		return cert, k8, nil
	}
	return cert, key, nil
}
