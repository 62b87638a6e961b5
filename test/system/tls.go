package system

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// makeCerts creates the cluster CA and one certificate per node with the
// binary's `reconciler certs`, the commands docs/cluster.md shows.
func (c *Cluster) makeCerts(t testing.TB) {
	t.Helper()
	cmds := [][]string{{"certs", "ca", "--dir", c.CertDir}}
	for _, p := range c.Nodes {
		cmds = append(cmds, []string{"certs", "node", "--dir", c.CertDir, "--id", p.ID})
	}
	for _, args := range cmds {
		out, err := exec.Command(c.Bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("reconciler %v: %v\n%s", args, err, out)
		}
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
func rewriteCA(t testing.TB, p *Process, from, to string) {
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
