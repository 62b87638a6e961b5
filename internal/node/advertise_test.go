package node

import (
	"net"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
)

// TestTLSAdvertisedRaftNameIsKept: a node advertises the raft address as
// configured, a DNS name included, not what the name resolved to at
// start. In a StatefulSet the name (reconciler-0.reconciler:8300) stays
// while the pod's IP changes with every restart, and a member must keep
// its raft address across restarts.
func TestTLSAdvertisedRaftNameIsKept(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	dir := newCA(t)
	bind := freeAddr(t)
	_, port, err := net.SplitHostPort(bind)
	if err != nil {
		t.Fatal(err)
	}
	named := net.JoinHostPort("localhost", port)
	n := c.start("n1", func(cfg *config.Config) {
		withTLS(t, c, dir)(cfg)
		cfg.Node.RaftAddr, cfg.Node.RaftAdvertiseAddr = bind, named
	})
	c.allServe(1, "n1")
	if got := n.Store().Addr(); got != named {
		t.Errorf("raft advertises %q, want %q as configured", got, named)
	}
}
