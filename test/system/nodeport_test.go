package system

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
	"github.com/policyrollout/reconciler/test/harness"
)

// floodWorkers per follower: more than the 256 handshake slots a node
// port had before issue 22.
const floodWorkers = 300

// TestElectionUnderHandshakeFlood is issue 22's finding 4 on real
// processes: both followers of a 3-node [tls] cluster are flooded with
// silent connections from 127.0.0.2 (no certificate), the leader is
// killed with SIGKILL, and the followers must still elect a new leader
// and promote a change while the flood goes on. Before the node port
// bounded handshakes per source, no leader was elected while it lasted.
func TestElectionUnderHandshakeFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	c := StartTLSCluster(t, 3)
	leader := c.Leader(harness.LeaderTimeout)
	followers := c.Others(leader)
	// The flood outlasts every wait below, so whatever they see, they
	// see under it; it stops when the test is done.
	ctx, cancel := context.WithTimeout(context.Background(), harness.LeaderTimeout+harness.PromoteTimeout+10*time.Second)
	flood := StartFlood(ctx, []string{followers[0].RaftAddr, followers[1].RaftAddr}, floodWorkers)
	t.Cleanup(func() { cancel(); flood.Wait() })
	err := harness.Eventually(10*time.Second, func() error {
		if n, _ := flood.Stats(); n < 2*floodWorkers {
			return fmt.Errorf("%d flood connections opened", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range followers {
		if ok := nodeCalls(t, c, leader, p, 10); ok != 10 {
			t.Errorf("%d of 10 calls from node %s to %s's node port completed during the flood", ok, leader.ID, p.ID)
		}
	}

	c.Kill(leader)
	killed := time.Now()
	next := c.Leader(harness.LeaderTimeout, followers...)
	elected := time.Since(killed)
	c.Promote(1, followers...)
	c.WaitServing(1, followers, harness.PromoteTimeout)
	promoted := time.Since(killed)
	if ctx.Err() != nil {
		t.Fatal("the flood ended before the cluster recovered: the test proves nothing")
	}
	dials, refused := flood.Stats()
	t.Logf("flooded with %d silent connections per follower from %s: new leader %s %v after the kill; tree 1 served %v after it (flood: %d connections opened, %d refused at once)",
		floodWorkers, FloodSource, next.ID, elected.Round(time.Millisecond), promoted.Round(time.Millisecond), dials, refused)
	for _, p := range followers {
		if len(p.LogLines("refused a node-to-node connection")) == 0 {
			t.Errorf("%s logged no refusal of the flood", p.ID)
		}
		series := `reconciler_node_port_refused_total{reason="source_handshakes"}`
		if n, err := c.Client.Metric(p, series); err != nil || n == 0 {
			t.Errorf("%s: %s = %v, %v", p.ID, series, n, err)
		}
	}
}

// nodeCalls makes n calls to GET /healthz on to's node port with from's
// certificate, each on a new connection (a new handshake), as a node's
// HTTP client does, and returns how many were answered at all.
func nodeCalls(t *testing.T, c *Cluster, from, to *harness.Node, n int) int {
	t.Helper()
	node, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(c.CertDir, from.ID)})
	if err != nil {
		t.Fatal(err)
	}
	tr := node.HTTPTransport()
	tr.DisableKeepAlives = true
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ok := 0
	for range n {
		resp, err := client.Get("https://" + to.RaftAddr + "/healthz")
		if err != nil {
			t.Logf("%s → %s: %v", from.ID, to.ID, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		// Any answer means the handshake went through the flood, which is
		// what this counts; the node port serves no probes (404), and
		// what a node may call there is peerauth's business.
		if resp.StatusCode > 0 {
			ok++
		}
	}
	return ok
}
