package system

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// NewTLSCluster is NewCluster with mutual TLS between the nodes: a
// cluster CA and node certificates made by `reconciler certs`, as
// docs/cluster.md shows, node.join naming raft addresses (the
// node-to-node port), and a certificate denylist, empty at first
// (Cluster.Deny).
func NewTLSCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newTLSCluster(t, n, "")
}

// StartTLSClusterWithToken is StartTLSCluster with an admin token on
// every node's API ([api] token_env), as a production cluster runs; the
// cluster's Client sends it.
func StartTLSClusterWithToken(t testing.TB, n int, token string) *Cluster {
	t.Helper()
	return start(newTLSCluster(t, n, token))
}

func newTLSCluster(t testing.TB, n int, apiToken string) *Cluster {
	t.Helper()
	certDir := filepath.Join(t.TempDir(), "certs")
	opts := clusterOptions(t, n)
	opts.APIToken = apiToken
	opts.JoinRaft = true
	opts.Configure = func(cfg *harness.Config) {
		cfg.Extra += fmt.Sprintf("\n[tls]\nca_file = %q\ncert_file = %q\nkey_file = %q\ndenylist_file = %q\n",
			filepath.Join(certDir, "ca.pem"), filepath.Join(certDir, cfg.ID+".pem"), filepath.Join(certDir, cfg.ID+"-key.pem"),
			filepath.Join(certDir, denylistFile))
	}
	c := &Cluster{Cluster: harness.NewCluster(t, opts), CertDir: certDir}
	c.makeCerts(t)
	return c
}

// StartTLSCluster is StartCluster over NewTLSCluster.
func StartTLSCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(NewTLSCluster(t, n))
}

// makeCerts creates the cluster CA and one certificate per node with the
// binary's `reconciler certs`, the commands docs/cluster.md shows.
func (c *Cluster) makeCerts(t testing.TB) {
	t.Helper()
	c.runCerts(t, "ca", "--dir", c.CertDir)
	for _, p := range c.Nodes {
		c.MakeNodeCert(t, p.ID)
	}
}

// MakeNodeCert issues a certificate of the cluster CA for node id (one
// that never joins, for tests of what such a certificate may do), with
// `reconciler certs node`.
func (c *Cluster) MakeNodeCert(t testing.TB, id string) {
	t.Helper()
	c.runCerts(t, "node", "--dir", c.CertDir, "--id", id)
}

func (c *Cluster) runCerts(t testing.TB, args ...string) {
	t.Helper()
	args = append([]string{"certs"}, args...)
	out, err := exec.Command(c.Bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("reconciler %v: %v\n%s", args, err, out)
	}
	if err := os.WriteFile(filepath.Join(c.CertDir, denylistFile), []byte("# serial numbers of denied node certificates\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// denylistFile is the [tls] denylist_file every node of a TLS cluster
// reads, in the certificate directory.
const denylistFile = "denied.txt"

// Deny adds serial (hex) to the denylist the nodes reload.
func (c *Cluster) Deny(t testing.TB, serial string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(c.CertDir, denylistFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "serial=%s\n", serial); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies a PEM file (tests replacing a node's certificate).
func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// rewriteCA points p's config from one ca_file to another.
func rewriteCA(t testing.TB, p *harness.Node, from, to string) {
	t.Helper()
	b, err := os.ReadFile(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), fmt.Sprintf("ca_file = %q", from), fmt.Sprintf("ca_file = %q", to), 1)
	if cfg == string(b) {
		t.Fatalf("%s: no ca_file %q", p.Config, from)
	}
	if err := os.WriteFile(p.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}
