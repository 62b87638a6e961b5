package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// ErrNoIdentity is a certificate that chains to the cluster CA but names no
// node (or a malformed one).
var ErrNoIdentity = errors.New("certificate names no reconciler node")

// The identity a node certificate carries.
const (
	// URIPrefix starts the URI SAN that names a node: URIPrefix + id.
	URIPrefix = "spiffe://reconciler/node/"
	// DNSSuffix ends the DNS SAN every node certificate also carries:
	// <id> + DNSSuffix.
	DNSSuffix = ".node.reconciler"
)

// NodeURI is the URI SAN naming node id.
func NodeURI(id string) *url.URL {
	u, _ := url.Parse(URIPrefix + id)
	return u
}

// NodeID returns the node id a certificate names in its URI SAN. A
// certificate naming two nodes is refused: it would let one node speak
// for another.
func NodeID(cert *x509.Certificate) (string, error) {
	id := ""
	for _, u := range cert.URIs {
		rest, ok := strings.CutPrefix(u.String(), URIPrefix)
		if !ok {
			continue
		}
		if !validID(rest) || (id != "" && id != rest) {
			return "", fmt.Errorf("%w: bad URI SAN %q", ErrNoIdentity, u.String())
		}
		id = rest
	}
	if id == "" {
		return "", fmt.Errorf("%w: no URI SAN %s<id> (subject %q)", ErrNoIdentity, URIPrefix, cert.Subject.String())
	}
	return id, nil
}

// validID is config's rule for node.id: 1-63 letters, digits, '.', '_'
// or '-'.
func validID(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		ok := c == '.' || c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
			(c >= 'A' && c <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// verifyPeer checks a peer's certificate chain against roots for usage and
// returns the node id it names.
func verifyPeer(roots *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage, now time.Time) (string, error) {
	if len(certs) == 0 {
		return "", errors.New("the peer sent no certificate; node-to-node connections need a node certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return "", fmt.Errorf("peer certificate (subject %q) does not chain to the cluster CA: %w",
			certs[0].Subject.String(), err)
	}
	return NodeID(certs[0])
}

// PeerID returns the node id of the verified peer of a connection served
// or dialled with this package's configs; an error when the connection is
// not TLS or the peer names no node.
func PeerID(cs *tls.ConnectionState) (string, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "", errors.New("not a node-to-node TLS connection")
	}
	return NodeID(cs.PeerCertificates[0])
}

// ConnPeerID is PeerID of a connection the Mux accepted or Dial opened.
func ConnPeerID(c net.Conn) (string, error) {
	tc, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return "", errors.New("not a node-to-node TLS connection")
	}
	cs := tc.ConnectionState()
	return PeerID(&cs)
}
