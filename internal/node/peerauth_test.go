package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// peerAuthTokenEnv holds the admin token of the peer-authority tests.
const peerAuthTokenEnv = "PEERAUTH_TEST_TOKEN"

const peerAuthToken = "peerauth-admin-token-0123456789"

// withTLSAndToken is withTLS plus an admin token on the API, as a
// production cluster runs.
func withTLSAndToken(t *testing.T, c *testCluster, dir string) func(*config.Config) {
	return func(cfg *config.Config) {
		withTLS(t, c, dir)(cfg)
		cfg.API.TokenEnv = peerAuthTokenEnv
	}
}

// adminCall sends a JSON request with the admin token and decodes a 2xx
// answer into out; it returns the status and the body.
func adminCall(t *testing.T, method, url, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+peerAuthToken)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
	}
	return resp.StatusCode, string(bytes.TrimSpace(data))
}

// startTLSTokenCluster starts n1, n2 and n3 over mutual TLS with an admin
// token, and returns the cluster, its CA directory and the leader.
func startTLSTokenCluster(t *testing.T) (*testCluster, string, string) {
	t.Setenv(peerAuthTokenEnv, peerAuthToken)
	ca := newCA(t)
	c := newTestCluster(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.start(id, withTLSAndToken(t, c, ca))
		if id == "n1" {
			c.allServe(1, "n1")
		}
	}
	all := []string{"n1", "n2", "n3"}
	eventually(t, waitTimeout, "three voters over TLS, registered everywhere", func() error {
		if got := servers(t, c.nodes["n1"]); !slices.Equal(got, []string{"n1=Voter", "n2=Voter", "n3=Voter"}) {
			return fmt.Errorf("servers %v", got)
		}
		for _, id := range all {
			if n := len(c.nodes[id].Store().State().Nodes); n != 3 {
				return fmt.Errorf("%s has %d nodes registered", id, n)
			}
		}
		return nil
	})
	return c, ca, c.leader(all...)
}

// TestTLSClusterAdminCallsReachEveryNode is issue 22's finding 10: under
// [tls] a health check reached the followers on their API address with
// the leader's node certificate (UNREACHABLE), and an admin's changeState
// or healthCheck sent to a follower lost its Authorization on the way to
// the leader (401). Now the leader asks each node on its node port and a
// follower forwards the admin's own credential.
func TestTLSClusterAdminCallsReachEveryNode(t *testing.T) {
	c, _, leader := startTLSTokenCluster(t)
	all := []string{"n1", "n2", "n3"}
	follower := followerOf(leader, all)
	for _, via := range []string{leader, follower} {
		var res cluster.HealthCheckResponse
		began := time.Now()
		code, body := adminCall(t, http.MethodPost, c.base(via)+"/v1/nodes:healthCheck", `{"group":"default"}`, &res)
		t.Logf("healthCheck via %s took %s", via, time.Since(began))
		if code != http.StatusOK || len(res.Nodes) != 3 {
			t.Errorf("healthCheck via %s = %d %s", via, code, body)
		}
		for _, n := range res.Nodes {
			t.Logf("healthCheck via %s: %s %s %v", via, n.ID, n.Healthy, n.Reasons)
			if n.Healthy == cluster.Unreachable {
				t.Errorf("healthCheck via %s: %s UNREACHABLE: %v", via, n.ID, n.Reasons)
			}
		}
	}
	other := followerOf(leader, slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == follower }))
	for _, state := range []string{"SAFE", "ACTIVE"} {
		body := fmt.Sprintf(`{"state":%q,"name":%q}`, state, other)
		if code, answer := adminCall(t, http.MethodPost, c.base(follower)+"/v1/nodes:changeState", body, nil); code != http.StatusOK {
			t.Errorf("admin changeState %s of %s sent to %s = %d %s", state, other, follower, code, answer)
			continue
		}
		if got := c.nodes[leader].Store().State().Nodes[other].State; got != raftstore.NodeState(state) {
			t.Errorf("%s is %s after changeState %s", other, got, state)
		}
	}
}

// TestTLSNodeSaysGoodbye is issue 22's finding 13: under [tls] a node's
// last heartbeat on a clean stop was refused (not marked as the node's
// own), so the leader never showed it TERMINATED.
func TestTLSNodeSaysGoodbye(t *testing.T) {
	c, _, leader := startTLSTokenCluster(t)
	victim := followerOf(leader, []string{"n1", "n2", "n3"})
	eventually(t, waitTimeout, "the leader hearing from "+victim, func() error {
		if v := c.nodes[leader].Cluster().View().Nodes[victim]; !v.Reachable {
			return fmt.Errorf("view %+v", v)
		}
		return nil
	})
	start := time.Now()
	c.stop(victim)
	v := c.nodes[leader].Cluster().View().Nodes[victim]
	if v.Status == nil || v.Status.State != raftstore.NodeTerminated {
		t.Fatalf("after %s stopped the leader shows %+v, want its last heartbeat TERMINATED", victim, v.Status)
	}
	t.Logf("stop of %s with its farewell took %s", victim, time.Since(start))
}

// TestTLSJoinThroughAFollower: a node whose node.join names a follower's
// node port joins (the follower points it to the leader, where its own
// certificate speaks for it: no relay, no header naming it), and leaves
// by itself; another member cannot remove it, and a certificate of a
// node that is not a member gets nothing but a join.
func TestTLSJoinThroughAFollower(t *testing.T) {
	c, ca, leader := startTLSTokenCluster(t)
	follower := followerOf(leader, []string{"n1", "n2", "n3"})
	began := time.Now()
	c.start("n4", func(cfg *config.Config) {
		withTLSAndToken(t, c, ca)(cfg)
		cfg.Node.Join = []string{c.nodes[follower].Store().Addr()}
	})
	eventually(t, waitTimeout, "n4 a voter through "+follower, func() error {
		got := servers(t, c.nodes[leader])
		if !slices.Contains(got, "n4=Voter") {
			return fmt.Errorf("servers %v", got)
		}
		if _, ok := c.nodes[leader].Store().State().Nodes["n4"]; !ok {
			return fmt.Errorf("n4 not registered")
		}
		return nil
	})
	t.Logf("n4 joined through %s in %s", follower, time.Since(began))
	leaderPort := c.nodes[leader].Store().Addr()
	if _, err := tlsconfig.CreateNode(ca, "n9", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, reason := peerCall(t, ca, "n9", leaderPort, "/v1/cluster:heartbeat", map[string]any{"id": "n9"}); code != 403 {
		t.Errorf("a heartbeat of n9, not a member = %d %s", code, reason)
	}
	if code, reason := peerCall(t, ca, follower, leaderPort, "/v1/cluster:leave", map[string]any{"id": "n4"}); code != 403 ||
		reason != "NOT_THE_NODE" {
		t.Errorf("%s removing n4 = %d %s", follower, code, reason)
	}
	if code, reason := peerCall(t, ca, "n4", leaderPort, "/v1/cluster:leave", map[string]any{"id": "n4"}); code != 200 {
		t.Fatalf("n4 leaving by itself = %d %s", code, reason)
	}
	if got := servers(t, c.nodes[leader]); slices.Contains(got, "n4=Voter") {
		t.Errorf("n4 still a member after its own leave: %v", got)
	}
}

// TestTLSNodeDoesNotWarnOfPlainHTTP is the other half of finding 13:
// every start with [tls] and API TLS warned that "nodes call each other's
// API over plain HTTP in this build", which is not so: node-to-node calls
// go to the node port.
func TestTLSNodeDoesNotWarnOfPlainHTTP(t *testing.T) {
	ca := newCA(t)
	f, err := tlsconfig.CreateNode(ca, "n2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	repo := newPolicyRepo(t, webPolicy(1))
	cfg := nodeConfig(t, "n2", repo.url)
	cfg.TLS = config.TLS{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key}
	cfg.API.TLSCertFile, cfg.API.TLSKeyFile = f.Cert, f.Key
	cfg.Node.Join = []string{"127.0.0.1:1"} // never answers; only the start matters
	var logs testlog.Buffer
	m := &Main{Config: cfg, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})}
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if strings.Contains(logs.String(), "plain HTTP") {
		t.Errorf("a [tls] node with API TLS warned of plain HTTP between nodes:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "listening") {
		t.Errorf("no listening line:\n%s", logs.String())
	}
}
