package api

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/certtest"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// writeFile writes data with a modification time of its own, so that a
// rewrite within the file system's time resolution still shows.
func writeFile(t *testing.T, path string, data []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// serveTLS serves the API over tc on loopback and returns its URL.
func serveTLS(t *testing.T, tc *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: New(Config{Generations: &fakeGenerations{}}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(tls.NewListener(ln, tc)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "https://" + ln.Addr().String()
}

// getServerSerial GETs /healthz on a new connection and returns the
// serial of the server's certificate.
func getServerSerial(t *testing.T, url string, roots *x509.CertPool, client []tls.Certificate) (int64, error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: client, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(url + "/healthz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz = %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestServerTLSReloadsRotatedFiles: a rotated certificate is served from
// the next handshake after the files change, without a restart; files
// that do not load leave the previous certificate in place.
func TestServerTLSReloadsRotatedFiles(t *testing.T) {
	ca := certtest.NewCA(t, "api-ca")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	mod := time.Now().Add(-time.Hour)
	c1, k1 := ca.Issue(t, 101, x509.ExtKeyUsageServerAuth)
	writeFile(t, certFile, c1, mod)
	writeFile(t, keyFile, k1, mod)
	clock := &fakeClock{now: time.Now()}
	tc, err := ServerTLS(TLSFiles{CertFile: certFile, KeyFile: keyFile, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, tc)
	roots := ca.Pool()
	if serial, err := getServerSerial(t, url, roots, nil); err != nil || serial != 101 {
		t.Fatalf("first serial = %d, %v", serial, err)
	}

	c2, k2 := ca.Issue(t, 102, x509.ExtKeyUsageServerAuth)
	writeFile(t, certFile, c2, mod.Add(time.Minute))
	writeFile(t, keyFile, k2, mod.Add(time.Minute))
	clock.advance(tlsCheckEvery)
	if serial, err := getServerSerial(t, url, roots, nil); err != nil || serial != 102 {
		t.Fatalf("after rotation serial = %d, %v", serial, err)
	}

	writeFile(t, certFile, []byte("not a certificate"), mod.Add(2*time.Minute))
	clock.advance(tlsCheckEvery)
	if serial, err := getServerSerial(t, url, roots, nil); err != nil || serial != 102 {
		t.Fatalf("after a broken rotation serial = %d, %v", serial, err)
	}
	if _, err := ServerTLS(TLSFiles{CertFile: certFile, KeyFile: keyFile}); err == nil {
		t.Error("broken files load at start")
	}
}

// TestServerTLSClientCA: with a client CA, a client without a
// certificate, or with one from another CA, fails the handshake.
func TestServerTLSClientCA(t *testing.T) {
	ca, other := certtest.NewCA(t, "api-ca"), certtest.NewCA(t, "other-ca")
	dir := t.TempDir()
	paths := map[string]string{"cert": filepath.Join(dir, "api.crt"), "key": filepath.Join(dir, "api.key"), "ca": filepath.Join(dir, "clients.crt")}
	c, k := ca.Issue(t, 7, x509.ExtKeyUsageServerAuth)
	writeFile(t, paths["cert"], c, time.Now())
	writeFile(t, paths["key"], k, time.Now())
	writeFile(t, paths["ca"], ca.PEM, time.Now())
	tc, err := ServerTLS(TLSFiles{CertFile: paths["cert"], KeyFile: paths["key"], ClientCAFile: paths["ca"]})
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, tc)
	roots := ca.Pool()
	clientCert := func(ca *certtest.CA) []tls.Certificate {
		return []tls.Certificate{ca.KeyPair(t, 9, x509.ExtKeyUsageClientAuth)}
	}
	if _, err := getServerSerial(t, url, roots, nil); err == nil {
		t.Error("a client without a certificate got through")
	}
	if _, err := getServerSerial(t, url, roots, clientCert(other)); err == nil {
		t.Error("a client with another CA's certificate got through")
	}
	if _, err := getServerSerial(t, url, roots, clientCert(ca)); err != nil {
		t.Errorf("a client of the CA: %v", err)
	}
}
