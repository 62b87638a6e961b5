package system

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
	"github.com/policyrollout/reconciler/test/harness"
)

// deniedRequest is a request the live policy denies: the attacker's
// allow-all generation would let it through.
const deniedRequest = `{"method":"DELETE","path":"/admin/users","source_ip":"203.0.113.9"}`

// TestRaftRefusesCertificatesThatAreNotTheMember is issue 22's takeover
// with certificates of the cluster CA, against a 3-node TLS cluster: a
// certificate of a node that never joined claiming to be the leader in
// the RPC header, a member's certificate claiming to be the leader, and
// the certificate of a member that has left, speaking for itself. Each is
// refused and logged by every node it is sent to, no node learns the
// attacker's generation, and the denied request stays denied. The left
// node's certificate, put on the denylist, then fails the node-to-node
// HTTP handshake too.
func TestRaftRefusesCertificatesThatAreNotTheMember(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	c := StartTLSCluster(t, 3)
	leader := c.Leader(harness.LeaderTimeout)
	others := c.Others(leader)
	member, removed := others[0], others[1]
	out, err := exec.Command(c.Bin, "certs", "node", "--dir", c.CertDir, "--id", "n9").CombinedOutput()
	if err != nil {
		t.Fatalf("reconciler certs node --id n9: %v\n%s", err, out)
	}
	before := decisions(t, c, c.Nodes)
	asLeader := harness.Claim{ID: leader.ID, Addr: leader.RaftAddr}

	for _, p := range c.Nodes {
		if err := harness.TakeOverAs(certDial(t, c, "n9"), p.RaftAddr, asLeader, takeoverGen, harness.AllowAllPolicy); err == nil {
			t.Errorf("%s accepted the takeover from n9 (never joined) claiming to be %s", p.ID, leader.ID)
		}
		if p == member {
			continue
		}
		if err := harness.TakeOverAs(certDial(t, c, member.ID), p.RaftAddr, asLeader, takeoverGen, harness.AllowAllPolicy); err == nil {
			t.Errorf("%s accepted the takeover from %s's certificate claiming to be %s", p.ID, member.ID, leader.ID)
		}
	}

	if err := c.Client.Call(context.Background(), http.MethodPost, leader.Base()+"/v1/cluster:leave",
		`{"id":"`+removed.ID+`"}`, http.StatusOK, nil); err != nil {
		t.Fatalf("leave %s: %v", removed.ID, err)
	}
	stayed := []*harness.Node{leader, member}
	self := harness.Claim{ID: removed.ID, Addr: removed.RaftAddr}
	for _, p := range stayed {
		if err := harness.TakeOverAs(certDial(t, c, removed.ID), p.RaftAddr, self, takeoverGen, harness.AllowAllPolicy); err == nil {
			t.Errorf("%s accepted the takeover from %s, which left the cluster", p.ID, removed.ID)
		}
	}

	denyRemoved(t, c, removed, leader)
	after := decisions(t, c, stayed)
	for _, p := range stayed {
		if g, err := c.Client.Generation(p, takeoverGen); err == nil {
			t.Errorf("%s knows the attacker's generation: %+v", p.ID, g)
		}
		if after[p.ID] != before[p.ID] {
			t.Errorf("%s: the denied request was %s before the attacks, %s after", p.ID, before[p.ID], after[p.ID])
		}
		if len(p.LogLines("refused a raft connection")) == 0 {
			t.Errorf("%s did not log the refused RPCs", p.ID)
		}
	}
	c.Kill(removed) // it left: its raft has shut down
	c.Promote(1, leader)
	c.WaitServing(1, stayed, harness.PromoteTimeout)
}

// denyRemoved puts the removed node's certificate on the denylist: its
// node-to-node HTTP calls, which membership does not cover, went through
// before and fail the handshake after, without a restart.
func denyRemoved(t *testing.T, c *Cluster, removed, leader *harness.Node) {
	t.Helper()
	if err := peerHeartbeat(c, removed.ID, leader.RaftAddr); err != nil {
		t.Fatalf("before the denylist, %s's certificate was refused on the node port: %v", removed.ID, err)
	}
	m, err := tlsconfig.Load(tlsconfig.DirFiles(c.CertDir, removed.ID))
	if err != nil {
		t.Fatal(err)
	}
	c.Deny(t, tlsconfig.SerialHex(m.Cert.Leaf))
	err = harness.Eventually(harness.ReadyTimeout, func() error {
		if err := peerHeartbeat(c, removed.ID, leader.RaftAddr); err == nil {
			return fmt.Errorf("%s's denied certificate still gets answers", removed.ID)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	// Refusals are logged at most once a second (with a count of the
	// others), so one may fall in a second another refusal already
	// filled: knock again until a line says it.
	err = harness.Eventually(harness.ReadyTimeout, func() error {
		if len(leader.LogLines("certificate is on the denylist")) > 0 {
			return nil
		}
		_ = peerHeartbeat(c, removed.ID, leader.RaftAddr)
		return fmt.Errorf("%s did not log the denied certificate", leader.ID)
	})
	if err != nil {
		t.Error(err)
	}
}

// peerHeartbeat sends a node-to-node heartbeat with id's certificate; an
// error when no HTTP answer came back (whatever its status).
func peerHeartbeat(c *Cluster, id, addr string) error {
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(c.CertDir, id)})
	if err != nil {
		return err
	}
	tr := n.HTTPTransport()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post("https://"+addr+"/v1/cluster:heartbeat",
		"application/json", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// decisions is each node's answer to deniedRequest: decision, rule and
// generation, which an attacker's generation would change.
func decisions(t *testing.T, c *Cluster, nodes []*harness.Node) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range nodes {
		d, err := c.Client.Evaluate(context.Background(), p, harness.Policy, deniedRequest)
		if err != nil {
			t.Fatalf("%s: %v", p.ID, err)
		}
		if d.Decision != "DENY" {
			t.Fatalf("%s: the request the attacker wants allowed is %s before the attack", p.ID, d.Decision)
		}
		out[p.ID] = d.Decision + " " + d.Rule + " " + d.Etag
	}
	return out
}

// certDial dials a node port with node id's certificate from the
// cluster's certificate directory (the CA's: a member's, or one made for
// a node that never joined), checking that the server is a cluster node.
func certDial(t *testing.T, c *Cluster, id string) raftstore.DialFunc {
	t.Helper()
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(c.CertDir, id)})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return n.Dial(ctx, addr, tlsconfig.ProtoRaft, "")
	}
}
