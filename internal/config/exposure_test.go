package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSFilesAllOrNone(t *testing.T) {
	_, err := Parse([]byte("[tls]\nca_file = \"ca.pem\"\n"), "/base")
	if err == nil || !strings.Contains(err.Error(), "tls.cert_file") || !strings.Contains(err.Error(), "tls.key_file") {
		t.Errorf("half a [tls] = %v", err)
	}
	c, err := Parse([]byte("[tls]\nca_file = \"c/ca.pem\"\ncert_file = \"/abs/n1.pem\"\nkey_file = \"c/n1-key.pem\"\n"), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS.CAFile != filepath.Join("/base", "c/ca.pem") || c.TLS.CertFile != "/abs/n1.pem" || !c.TLS.Enabled() {
		t.Errorf("paths = %+v", c.TLS)
	}
}

func TestCheckExposureNodeTLS(t *testing.T) {
	cases := []struct {
		name       string
		http, raft string
		tls        bool
		refused    bool
	}{
		{"loopback without TLS", "127.0.0.1:8181", "127.0.0.1:8300", false, false},
		{"localhost without TLS", "localhost:8181", "[::1]:8300", false, false},
		{"wildcard raft without TLS", "127.0.0.1:8181", "0.0.0.0:8300", false, true},
		{"LAN http without TLS", "10.0.0.1:8181", "127.0.0.1:8300", false, true},
		{"LAN with TLS", "10.0.0.1:8181", "10.0.0.1:8300", true, false},
	}
	for _, tc := range cases {
		c := Default()
		c.Node.HTTPAddr, c.Node.RaftAddr = tc.http, tc.raft
		if tc.tls {
			c.TLS = TLS{CAFile: "ca.pem", CertFile: "n.pem", KeyFile: "n-key.pem"}
		}
		warnings, err := c.CheckExposure(1)
		if refused := errors.Is(err, ErrExposed); refused != tc.refused {
			t.Errorf("%s: err = %v", tc.name, err)
		}
		if warned := len(warnings) > 0; warned != (!tc.tls && !tc.refused) {
			t.Errorf("%s: warnings = %q", tc.name, warnings)
		}
	}
	c := Default()
	c.Node.RaftAddr, c.Node.RaftAdvertiseAddr = "127.0.0.1:8300", "10.0.0.1:8300"
	if _, err := c.CheckExposure(1); !errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), "node.raft_advertise_addr") {
		t.Errorf("advertised LAN address without TLS = %v", err)
	}
}

func TestTLSDenylistFile(t *testing.T) {
	c, err := Parse([]byte("[tls]\nca_file = \"ca.pem\"\ncert_file = \"n1.pem\"\nkey_file = \"n1-key.pem\"\ndenylist_file = \"certs/denied.txt\"\n"), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS.DenylistFile != filepath.Join("/base", "certs/denied.txt") {
		t.Errorf("denylist_file = %q", c.TLS.DenylistFile)
	}
	if _, err := Parse([]byte("[tls]\ndenylist_file = \"denied.txt\"\n"), "/base"); err == nil ||
		!strings.Contains(err.Error(), "tls.denylist_file") {
		t.Errorf("a denylist without the node's certificate = %v", err)
	}
}
