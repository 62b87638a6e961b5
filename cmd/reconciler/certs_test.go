package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

func TestCertsCreatesACAAndNodeCertificatesThatLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if code, _, stderr := cli(t, "", "certs", "ca", "--dir", dir); code != exitOK {
		t.Fatalf("certs ca = %d %s", code, stderr)
	}
	code, stdout, stderr := cli(t, "", "certs", "node", "--dir", dir, "--id", "n1", "--host", "10.0.0.1,n1.example")
	if code != exitOK || !strings.Contains(stdout, "[tls]\nca_file = ") {
		t.Fatalf("certs node = %d %s %s", code, stdout, stderr)
	}
	m, err := tlsconfig.Load(tlsconfig.DirFiles(dir, "n1"))
	if err != nil || m.ID != "n1" {
		t.Fatalf("the node certificate does not load: %v", err)
	}
	if err := m.Cert.Leaf.VerifyHostname("10.0.0.1"); err != nil {
		t.Errorf("--host not in the certificate: %v", err)
	}
	// Nothing is overwritten, and the id is required.
	if code, _, _ := cli(t, "", "certs", "ca", "--dir", dir); code != exitCheck {
		t.Errorf("second certs ca = %d", code)
	}
	if code, _, _ := cli(t, "", "certs", "node", "--dir", dir); code != exitUsage {
		t.Errorf("certs node without --id = %d", code)
	}
	if code, _, _ := cli(t, "", "certs"); code != exitUsage {
		t.Errorf("certs without a subcommand = %d", code)
	}
}

// TestServeRefusesToListenBeyondLoopbackWithoutTLS: secure by default, a
// node whose addresses are not loopback needs [tls]; on loopback it runs
// and warns.
func TestServeRefusesToListenBeyondLoopbackWithoutTLS(t *testing.T) {
	path := writeServeConfig(t, "10.255.255.1:8181", "json")
	code, _, stderr := cli(t, "", "serve", "--config", path)
	if code != exitCheck || !strings.Contains(stderr, "node.http_addr (10.255.255.1:8181) is not loopback") ||
		!strings.Contains(stderr, "[tls]") {
		t.Errorf("serve on a LAN address without [tls] = %d: %s", code, stderr)
	}
}
