package tlsconfig_test

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/certtest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// TestAPIServerLogsARefusedRotationOnce: a rotation that does not load
// keeps the served certificate and is logged once per change of the files,
// not at every handshake (a half-done rotation must not flood the log).
func TestAPIServerLogsARefusedRotationOnce(t *testing.T) {
	ca := certtest.NewCA(t, "api-ca")
	certFile, keyFile := ca.WriteServer(t, t.TempDir(), "api", 1)
	var logs testlog.Buffer
	tc, err := tlsconfig.APIServer(tlsconfig.APIFiles{CertFile: certFile, KeyFile: keyFile, CheckInterval: -1,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	first, err := tc.GetConfigForClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	refusals := func() int { return strings.Count(logs.String(), "do not load") }
	copyBytes(t, certFile, []byte("not a certificate"))
	for range 3 {
		if got, err := tc.GetConfigForClient(nil); err != nil || got != first {
			t.Fatalf("after a broken rotation: %v, %v; want the first configuration", got, err)
		}
	}
	if n := refusals(); n != 1 {
		t.Errorf("one broken rotation logged %d times:\n%s", n, logs.String())
	}
	copyBytes(t, certFile, []byte("still not a certificate"))
	if got, _ := tc.GetConfigForClient(nil); got != first || refusals() != 2 {
		t.Errorf("a second broken rotation: same config %v, %d refusals logged", got == first, refusals())
	}
}

// TestAPIServerBoundsItsFiles: a certificate file over 1 MiB is refused
// before it is parsed, even when it holds a valid certificate.
func TestAPIServerBoundsItsFiles(t *testing.T) {
	ca := certtest.NewCA(t, "api-ca")
	dir := t.TempDir()
	certPEM, keyPEM := ca.Issue(t, 1, x509.ExtKeyUsageServerAuth)
	certFile, keyFile := filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	padded := append(certPEM, bytes.Repeat([]byte("#\n"), 1<<20)...)
	if err := os.WriteFile(certFile, padded, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconfig.APIServer(tlsconfig.APIFiles{CertFile: certFile, KeyFile: keyFile}); err == nil ||
		!strings.Contains(err.Error(), "larger than") {
		t.Errorf("a 2 MiB certificate file: %v", err)
	}
}
