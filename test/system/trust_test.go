package system

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
	"github.com/policyrollout/reconciler/test/harness"
)

// takeoverGen is the generation the attacker stages and activates.
const takeoverGen = 5000

// TestRaftTakeoverOfPlaintextCluster is issue 15's attack 1 on a cluster
// without [tls], as `make run` starts one on loopback: one AppendEntries
// with a higher term, carrying StageGeneration + ActivateGeneration, sent
// to a node's raft port by a program that is not a member. The node then
// activates the attacker's allow-all policy. This is why a node refuses
// to listen beyond loopback without [tls] (config.CheckExposure); the
// same attack against a TLS cluster is TestRaftTakeoverOfTLSClusterFails.
func TestRaftTakeoverOfPlaintextCluster(t *testing.T) {
	c := startSystem(t, 3)
	victim := c.Others(c.Leader(harness.LeaderTimeout))[0]
	if err := harness.TakeOver(raftstore.TCPDial, victim.RaftAddr, takeoverGen, harness.AllowAllPolicy); err != nil {
		t.Fatalf("the takeover was refused by a plaintext raft port: %v", err)
	}
	// The leader loop may restage main right after (as generation 5001),
	// so what proves the takeover is the record of generation 5000: the
	// attacker's commit, activated.
	err := harness.Eventually(harness.PromoteTimeout, func() error {
		g, err := c.Client.Generation(victim, takeoverGen)
		if err != nil {
			return err
		}
		if g.Commit != harness.TakeoverCommit || !g.Activated() {
			return fmt.Errorf("generation %d: commit %s, state %s", takeoverGen, g.Commit, g.State)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the plaintext node did not activate the attacker's generation: %v", err)
	}
}

// TestRaftTakeoverOfTLSClusterFails sends the same attack to every raft
// port of a 3-node cluster over mutual TLS: in plaintext, over TLS
// without a certificate, and with a node certificate of another CA. Every
// attempt is refused during the handshake and logged, no node learns of
// the attacker's generation, and the cluster still promotes.
func TestRaftTakeoverOfTLSClusterFails(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	c := StartTLSCluster(t, 3)
	attacks := map[string]raftstore.DialFunc{
		"plaintext":                 raftstore.TCPDial,
		"TLS without certificate":   noCertDial,
		"certificate of another CA": otherCADial(t),
	}
	for _, p := range c.Nodes {
		for name, dial := range attacks {
			if err := harness.TakeOver(dial, p.RaftAddr, takeoverGen, harness.AllowAllPolicy); err == nil {
				t.Errorf("%s: %s's raft port accepted the takeover", name, p.ID)
			}
		}
	}
	c.Promote(1)
	gen := c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
	for _, p := range c.Nodes {
		if g, err := c.Client.Generation(p, takeoverGen); err == nil {
			t.Errorf("%s knows the attacker's generation: %+v", p.ID, g)
		}
		s, err := c.Client.Status(p)
		if err != nil || s.ServedGeneration != gen {
			t.Errorf("%s: status %+v, %v", p.ID, s, err)
		}
		if len(p.LogLines("refused a node-to-node connection")) == 0 {
			t.Errorf("%s did not log the refused attempts", p.ID)
		}
	}
}

func noCertDial(ctx context.Context, addr string) (net.Conn, error) {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, //nolint:gosec // the attacker
		NextProtos: []string{tlsconfig.ProtoRaft}}}
	return d.DialContext(ctx, "tcp", addr)
}

// otherCADial dials with a node certificate for "n2" that another CA
// signed, trusting any server, so that the refusal is the node's.
func otherCADial(t *testing.T) raftstore.DialFunc {
	dir := t.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	f, err := tlsconfig.CreateNode(dir, "n2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tlsconfig.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, //nolint:gosec // the attacker
			Certificates: []tls.Certificate{m.Cert}, NextProtos: []string{tlsconfig.ProtoRaft}}}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// TestNodeFromAnotherCACannotJoin starts a fourth process whose node
// certificate another CA signed, joining the first node of a TLS cluster:
// every attempt is refused in the handshake (and logged by the member),
// no node registers it and it finds no leader.
func TestNodeFromAnotherCACannotJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	c := NewTLSCluster(t, 4)
	members, stranger := c.Nodes[:3], c.Nodes[3]
	other := t.TempDir()
	if err := tlsconfig.CreateCA(other, time.Hour); err != nil {
		t.Fatal(err)
	}
	f, err := tlsconfig.CreateNode(other, stranger.ID, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	own := tlsconfig.DirFiles(c.CertDir, stranger.ID)
	for from, to := range map[string]string{f.Cert: own.Cert, f.Key: own.Key, f.CA: own.CA + "." + stranger.ID} {
		copyFile(t, from, to)
	}
	// The stranger trusts its own CA; its certificate is the other CA's.
	rewriteCA(t, stranger, own.CA, own.CA+"."+stranger.ID)
	c.Start(members[0])
	c.WaitReady(members[0])
	for _, p := range members[1:] {
		c.Start(p)
		c.WaitReady(p)
	}
	c.WaitServing(0, members, harness.ReadyTimeout)
	c.Start(stranger)
	// Its joins go to every member's node port in turn; wait until they
	// have refused a few of them.
	err = harness.Eventually(harness.ReadyTimeout, func() error {
		n := 0
		for _, p := range members {
			n += len(p.LogLines("refused a node-to-node connection"))
		}
		if n < 3 {
			return fmt.Errorf("%d refusals logged so far", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range members {
		s, err := c.Client.Status(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range s.Nodes {
			if n.ID == stranger.ID {
				t.Errorf("%s lists %s: %+v", p.ID, stranger.ID, n)
			}
		}
	}
	if s, err := c.Client.Status(stranger); err != nil || s.Leader != "" {
		t.Errorf("%s found a leader: %+v %v", stranger.ID, s, err)
	}
	c.Kill(stranger) // it would never become ready; stopping it is expected
}
