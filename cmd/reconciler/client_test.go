package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/certtest"
)

// TestClientTLSAndTokenFile: a server that requires a client certificate
// of its CA answers status only when --ca-file, --cert-file and
// --key-file are given, and gets the token of --token-file.
func TestClientTLSAndTokenFile(t *testing.T) {
	ca := certtest.NewCA(t, "api")
	dir := t.TempDir()
	certFile, keyFile := ca.WriteServer(t, dir, "server", 2)
	clientCert, clientKey := ca.Issue(t, 3, x509.ExtKeyUsageClientAuth)
	files := map[string][]byte{"ca.pem": ca.PEM, "client.crt": clientCert, "client.key": clientKey, "token": []byte("tok-123\n")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var auth string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Write([]byte(statusFixture))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	base := []string{"status", "--server", srv.URL, "--ca-file", filepath.Join(dir, "ca.pem")}
	if code, _, stderr := cli(t, "", base...); code != exitCheck || !strings.Contains(stderr, "cannot reach") {
		t.Errorf("without a client certificate = %d %q", code, stderr)
	}
	full := append(base, "--cert-file", filepath.Join(dir, "client.crt"), "--key-file", filepath.Join(dir, "client.key"),
		"--token-file", filepath.Join(dir, "token"), "-o", "json")
	if code, stdout, stderr := cli(t, "", full...); code != 0 || stdout != statusFixture || auth != "Bearer tok-123" {
		t.Errorf("with TLS = %d %q %q auth %q", code, stdout, stderr, auth)
	}
	if code, _, stderr := cli(t, "", "status", "--server", srv.URL, "--cert-file", "x"); code != exitUsage ||
		!strings.Contains(stderr, "--cert-file and --key-file go together") {
		t.Errorf("cert without key = %d %q", code, stderr)
	}
	if code, _, stderr := cli(t, "", "status", "--server", srv.URL); code != exitCheck || !strings.Contains(stderr, "certificate") {
		t.Errorf("unknown CA = %d %q", code, stderr)
	}
}

// TestClientDoesNotFollowRedirects: a redirect would carry the token to
// another address, so the client stops and says where it pointed.
func TestClientDoesNotFollowRedirects(t *testing.T) {
	var other int
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other++ }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/v1/status", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	t.Setenv("RECONCILER_TOKEN", "secret")
	code, _, stderr := cli(t, "", "status", "--server", srv.URL)
	if code != exitCheck || other != 0 || !strings.Contains(stderr, "redirected to "+target.URL) {
		t.Errorf("redirect = %d %q (target asked %d times)", code, stderr, other)
	}
}

// TestHelpListsClientFlags: every remote command lists the same
// connection flags.
func TestHelpListsClientFlags(t *testing.T) {
	for _, cmd := range []string{"status", "rollback", "accept-history", "experiments", "operations", "nodes", "raft"} {
		_, stdout, _ := cli(t, "", "help", cmd)
		for _, flag := range []string{"--token-env", "-server", "-ca-file", "-cert-file", "-timeout"} {
			if !strings.Contains(stdout, strings.TrimLeft(flag, "-")) {
				t.Errorf("help %s lacks %s:\n%s", cmd, flag, stdout)
			}
		}
	}
}
