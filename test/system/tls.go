package system

import (
	"os/exec"
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
