package tlsconfig_test

import (
	"crypto/x509"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// FuzzParse feeds arbitrary CA, certificate and key files to the loader a
// node runs at start and on every rotation: it must never panic, and what
// it accepts must name a node and be signed by the CA it was given.
func FuzzParse(f *testing.F) {
	dir := f.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		f.Fatal(err)
	}
	files, err := tlsconfig.CreateNode(dir, "n1", []string{"10.0.0.1", "node.example"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	ca, cert, key := read(files.CA), read(files.Cert), read(files.Key)
	f.Add(ca, cert, key)
	f.Add(ca, ca, read(filepath.Join(dir, tlsconfig.CAKeyFile)))
	f.Add(cert, cert, key)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), cert, key)
	f.Add([]byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, ca, cert, key []byte) {
		m, err := tlsconfig.Parse(ca, cert, key)
		if err != nil {
			return
		}
		id, err := tlsconfig.NodeID(m.Cert.Leaf)
		if err != nil || id != m.ID || m.Roots == nil {
			t.Fatalf("accepted material without a node identity: %q %v", m.ID, err)
		}
	})
}

// FuzzNodeID feeds arbitrary URI SANs to the identity check every
// node-to-node connection runs: it must never panic, and an id it returns
// is a valid node id that the certificate names exactly.
func FuzzNodeID(f *testing.F) {
	f.Add("spiffe://reconciler/node/n1", "")
	f.Add("spiffe://reconciler/node/n1", "spiffe://reconciler/node/n2")
	f.Add("spiffe://reconciler/node/../n1", "https://x")
	f.Add("spiffe://reconciler/node/", "spiffe://reconciler/node/n1%2Fx")
	f.Fuzz(func(t *testing.T, a, b string) {
		var uris []*url.URL
		for _, s := range []string{a, b} {
			if u, err := url.Parse(s); err == nil {
				uris = append(uris, u)
			}
		}
		id, err := tlsconfig.NodeID(&x509.Certificate{URIs: uris})
		if err != nil {
			return
		}
		if tlsconfig.NodeURI(id).String() != tlsconfig.URIPrefix+id || strings.ContainsAny(id, "/?#%") {
			t.Fatalf("NodeID accepted %q from %q, %q", id, a, b)
		}
	})
}
