package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
	"github.com/policyrollout/reconciler/test/harness"
)

// newCA writes a cluster CA into a new directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withTLS gives a node a certificate of the CA in dir (made once) and
// joins it to the raft address of the cluster's first node.
func withTLS(t *testing.T, c *testCluster, dir string) func(*config.Config) {
	return func(cfg *config.Config) {
		f := tlsconfig.DirFiles(dir, cfg.Node.ID)
		if _, err := os.Stat(f.Cert); err != nil {
			if f, err = tlsconfig.CreateNode(dir, cfg.Node.ID, nil, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		cfg.TLS = config.TLS{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key}
		if len(cfg.Node.Join) > 0 {
			cfg.Node.Join = []string{c.nodes[c.first()].Store().Addr()}
		}
	}
}

// peerCall sends a node-to-node request with node id's certificate from
// dir to the raft port addr, and returns the status and the reason.
func peerCall(t *testing.T, dir, id, addr, path string, body any) (int, string) {
	t.Helper()
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, id)})
	if err != nil {
		t.Fatal(err)
	}
	tr := n.HTTPTransport()
	defer tr.CloseIdleConnections()
	return postJSON(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "https://"+addr+path, body)
}

func postJSON(t *testing.T, cl *http.Client, url string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := cl.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct {
			Details []struct{ Reason string } `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &e)
	if len(e.Error.Details) > 0 {
		return resp.StatusCode, e.Error.Details[0].Reason
	}
	return resp.StatusCode, string(bytes.TrimSpace(data))
}

func mustCommand(t *testing.T, p raftstore.Payload) raftstore.Command {
	t.Helper()
	cmd, err := raftstore.NewCommand(p)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// TestTLSClusterTrustsOnlyItsNodes runs three nodes over mutual TLS and
// tries issue 15's attacks on node-to-node trust against it.
func TestTLSClusterTrustsOnlyItsNodes(t *testing.T) {
	ca := newCA(t)
	c := newTestCluster(t)
	c.start("n1", withTLS(t, c, ca))
	c.allServe(1, "n1")
	c.start("n2", withTLS(t, c, ca))
	c.start("n3", withTLS(t, c, ca))
	all := []string{"n1", "n2", "n3"}
	eventually(t, waitTimeout, "three voters over TLS", func() error {
		if got := servers(t, c.nodes["n1"]); !slices.Equal(got, []string{"n1=Voter", "n2=Voter", "n3=Voter"}) {
			return fmt.Errorf("servers %v", got)
		}
		return nil
	})
	leader := c.leader(all...)
	c.write(webPolicy(2))
	c.reconcile(followerOf(leader, all)) // forwarded over TLS
	c.allServe(2, all...)
	leaderRaft := c.nodes[leader].Store().Addr()
	victim, sender := "n2", "n3"
	if leader == "n2" {
		victim = "n1"
	}
	if leader == sender {
		sender = "n1"
		if victim == "n1" {
			victim = "n2"
		}
	}

	t.Run("a node cannot report or beat for another", func(t *testing.T) {
		forged := mustCommand(t, &raftstore.ReportFailed{Generation: 2, NodeID: victim, Errors: []string{"spoofed"},
			Time: time.Now()})
		if code, reason := peerCall(t, ca, sender, leaderRaft, "/v1/cluster:propose", forged); code != 403 ||
			reason != "NOT_THE_NODE" {
			t.Errorf("%s reporting Failed for %s = %d %s", sender, victim, code, reason)
		}
		hb := map[string]any{"id": victim, "generation": 2}
		if code, reason := peerCall(t, ca, sender, leaderRaft, "/v1/cluster:heartbeat", hb); code != 403 {
			t.Errorf("%s beating for %s = %d %s", sender, victim, code, reason)
		}
		hb["id"] = sender
		if code, reason := peerCall(t, ca, sender, leaderRaft, "/v1/cluster:heartbeat", hb); code != 200 {
			t.Errorf("%s beating for itself = %d %s", sender, code, reason)
		}
		huge := mustCommand(t, &raftstore.ReportFailed{Generation: 2, NodeID: sender,
			Errors: []string{strings.Repeat("x", 900<<10)[:200<<10]}, Time: time.Now()})
		if code, reason := peerCall(t, ca, sender, leaderRaft, "/v1/cluster:propose", huge); code != 400 {
			t.Errorf("a report with 200 KB of errors = %d %s", code, reason)
		}
		if g := c.nodes[leader].Store().State().Generations[2]; g.State != raftstore.GenerationActive {
			t.Errorf("generation 2 is %s after the spoofed reports", g.State)
		}
	})

	t.Run("node-only endpoints refuse the user API", func(t *testing.T) {
		for _, path := range []string{"/v1/cluster:propose", "/v1/cluster:heartbeat"} {
			var body any = map[string]any{"id": victim, "generation": 2}
			if strings.HasSuffix(path, "propose") {
				body = mustCommand(t, &raftstore.ReportReady{Generation: 2, NodeID: victim, Time: time.Now()})
			}
			if code, reason := postJSON(t, http.DefaultClient, c.base(leader)+path, body); code != 403 {
				t.Errorf("%s on the user API = %d %s", path, code, reason)
			}
		}
	})

	t.Run("a join may not move another node", func(t *testing.T) {
		before := c.nodes[leader].Store().State().Nodes[victim]
		req := map[string]any{"id": victim, "raftAddr": before.RaftAddr, "httpAddr": "127.0.0.1:1", "voter": true}
		if code, reason := postJSON(t, http.DefaultClient, c.base(leader)+"/v1/cluster:join", req); code != 403 ||
			reason != "NOT_THE_NODE" {
			t.Errorf("re-join of %s at another httpAddr through the API = %d %s", victim, code, reason)
		}
		if code, reason := peerCall(t, ca, sender, leaderRaft, "/v1/cluster:join", req); code != 403 {
			t.Errorf("re-join of %s by %s = %d %s", victim, sender, code, reason)
		}
		if after := c.nodes[leader].Store().State().Nodes[victim]; after.HTTPAddr != before.HTTPAddr {
			t.Errorf("%s moved to %s", victim, after.HTTPAddr)
		}
	})

	t.Run("a node with a certificate from another CA cannot join", func(t *testing.T) {
		other := newCA(t)
		f, err := tlsconfig.CreateNode(other, "n4", nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		n4, err := tlsconfig.NewNode(tlsconfig.Config{Files: f})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mux := tlsconfig.NewMux(ln, n4, nil)
		defer mux.Close()
		req := map[string]any{"id": "n4", "raftAddr": ln.Addr().String(), "httpAddr": "127.0.0.1:1", "voter": true}
		if code, reason := postJSON(t, http.DefaultClient, c.base(leader)+"/v1/cluster:join", req); code != 400 ||
			reason != "RAFT_UNREACHABLE" {
			t.Errorf("join of n4 from another CA = %d %s", code, reason)
		}
		if _, err := peerCall4xx(other, "n4", leaderRaft); err == nil {
			t.Error("n4's certificate was accepted on the leader's node port")
		}
		if got := servers(t, c.nodes[leader]); len(got) != 3 {
			t.Errorf("servers after the refused join: %v", got)
		}
	})

	t.Run("certificate rotation without restart", func(t *testing.T) {
		serial := func() string {
			n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(ca, sender)})
			if err != nil {
				t.Fatal(err)
			}
			conn, err := n.Dial(context.Background(), c.nodes[victim].Store().Addr(), tlsconfig.ProtoHTTP, victim)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
		}
		before := serial()
		f := tlsconfig.DirFiles(ca, victim)
		for _, p := range []string{f.Cert, f.Key} {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tlsconfig.CreateNode(ca, victim, nil, 2*time.Hour); err != nil {
			t.Fatal(err)
		}
		eventually(t, waitTimeout, victim+" presenting its new certificate", func() error {
			if s := serial(); s == before {
				return fmt.Errorf("still serial %s", s)
			}
			return nil
		})
		c.write(webPolicy(3))
		c.reconcile(victim)
		c.allServe(3, all...)
	})

	t.Run("a restarted node moves its own HTTP address", func(t *testing.T) {
		c.stop(victim)
		m := c.run(victim) // a new HTTP port, the same raft address
		eventually(t, waitTimeout, victim+" registered at its new address", func() error {
			if got := c.nodes[leader].Store().State().Nodes[victim].HTTPAddr; got != m.Addr() {
				return fmt.Errorf("registered at %s, listens on %s", got, m.Addr())
			}
			return nil
		})
		c.allServe(3, all...)
	})

	t.Run("the raft takeover gets nowhere", func(t *testing.T) {
		noCert := func(ctx context.Context, addr string) (net.Conn, error) {
			d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, //nolint:gosec // the attacker
				NextProtos: []string{tlsconfig.ProtoRaft}}}
			return d.DialContext(ctx, "tcp", addr)
		}
		for name, dial := range map[string]raftstore.DialFunc{"plaintext": raftstore.TCPDial, "TLS without a certificate": noCert} {
			if err := harness.TakeOver(dial, c.nodes[victim].Store().Addr(), 5000, harness.AllowAllPolicy); err == nil {
				t.Errorf("%s: the takeover was accepted", name)
			}
		}
		if _, ok := c.nodes[victim].Store().State().Generations[5000]; ok {
			t.Error("generation 5000 reached the state")
		}
		c.allServe(3, all...)
	})
}

// peerCall4xx tries a node-to-node heartbeat with id's certificate from
// dir; an error when the connection is refused.
func peerCall4xx(dir, id, addr string) (int, error) {
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, id)})
	if err != nil {
		return 0, err
	}
	tr := n.HTTPTransport()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post("https://"+addr+"/v1/cluster:heartbeat",
		"application/json", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, errors.New(resp.Status)
}
