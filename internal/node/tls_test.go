package node

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/certtest"
)

// TestNodeServesTheAPIOverTLS: with [api] tls_cert_file and tls_key_file
// the node's API, decisions included, answers HTTPS only.
func TestNodeServesTheAPIOverTLS(t *testing.T) {
	ca := certtest.NewCA(t, "api-ca")
	cfg := singleNode(t, webPolicy(1))
	cfg.API.TLSCertFile, cfg.API.TLSKeyFile = ca.WriteServer(t, t.TempDir(), "api", 2)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := startNode(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	eventually(t, waitTimeout, "a decision over TLS", func() error {
		resp, err := client.Post("https://"+m.Addr()+"/v1/policies/web:evaluate", "application/json", strings.NewReader(`{"path":"/v1"}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.TLS == nil {
			return errStatus(resp.StatusCode)
		}
		return nil
	})
	if resp, err := httpClient.Get("http://" + m.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered")
		}
	}
}

type errStatus int

func (e errStatus) Error() string { return http.StatusText(int(e)) }
