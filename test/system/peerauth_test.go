package system

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
	"github.com/policyrollout/reconciler/test/harness"
)

// peerAuthToken is the admin token of the node-port authority tests.
const peerAuthToken = "system-peerauth-admin-token-0123"

// certPost sends a node-to-node POST to the node port addr with node id's
// certificate from dir and the given extra headers, and returns the
// status and the answer.
func certPost(t *testing.T, dir, id, addr, path string, body any, headers map[string]string) (int, string) {
	t.Helper()
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, id)})
	if err != nil {
		t.Fatal(err)
	}
	tr := n.HTTPTransport()
	defer tr.CloseIdleConnections()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s%s as %s: %v", addr, path, id, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(data))
}

// registry is the leader's node registry: id → HTTP address.
func registry(t *testing.T, c *Cluster, leader *harness.Node) map[string]string {
	t.Helper()
	s, err := c.Client.Status(leader)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range s.Nodes {
		out[n.ID] = n.HTTPAddr
	}
	return out
}

// TestNodeCertificateIsNotAdmin is issue 22's findings 2 and 3 on three
// real processes with [tls] and an admin token: a certificate of the
// cluster CA for n9, never a member, removed members with
// /v1/cluster:leave (a node certificate without Authorization was admin
// on /v1/cluster:*), and a member's certificate moved another member's
// HTTP address by naming it in X-Reconciler-Origin. Each is refused now,
// nothing changes, and the audit line names the certificate's node with
// no role.
func TestNodeCertificateIsNotAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	c := StartTLSClusterWithToken(t, 3, peerAuthToken)
	leader := c.Leader(harness.LeaderTimeout)
	others := c.Others(leader)
	c.MakeNodeCert(t, "n9")
	before := registry(t, c, leader)

	for _, victim := range others {
		code, body := certPost(t, c.CertDir, "n9", leader.RaftAddr, "/v1/cluster:leave", map[string]string{"id": victim.ID}, nil)
		if code != http.StatusForbidden {
			t.Errorf("n9 (not a member) removing %s = %d %s", victim.ID, code, body)
		}
	}
	code, body := certPost(t, c.CertDir, others[0].ID, leader.RaftAddr, "/v1/cluster:leave", map[string]string{"id": others[1].ID}, nil)
	if code != http.StatusForbidden {
		t.Errorf("member %s removing %s = %d %s", others[0].ID, others[1].ID, code, body)
	}
	for _, victim := range []*harness.Node{leader, others[1]} {
		move := map[string]any{"id": victim.ID, "raftAddr": victim.RaftAddr, "httpAddr": "198.51.100.66:80", "voter": true}
		code, body := certPost(t, c.CertDir, others[0].ID, leader.RaftAddr, "/v1/cluster:join", move,
			map[string]string{"X-Reconciler-Origin": victim.ID})
		if code != http.StatusForbidden {
			t.Errorf("%s moving %s with X-Reconciler-Origin: %s = %d %s", others[0].ID, victim.ID, victim.ID, code, body)
		}
	}

	after := registry(t, c, leader)
	for id, addr := range before {
		if after[id] != addr {
			t.Errorf("%s registered at %q, was %q", id, after[id], addr)
		}
	}
	if len(after) != 3 {
		t.Errorf("registry after the attacks: %v", after)
	}
	checkAuditNamesNode(t, leader, "n9")
	// The cluster still works: a promotion reaches every node.
	c.Promote(1)
	c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
}

// checkAuditNamesNode: the leader's audit lines for node id's refused
// calls name it, with role "node", never "admin".
func checkAuditNamesNode(t *testing.T, leader *harness.Node, id string) {
	t.Helper()
	lines := leader.LogLines(`"token":"node ` + id + `"`)
	if len(lines) == 0 {
		t.Errorf("no audit line names node %s", id)
	}
	for _, l := range lines {
		t.Logf("audit: %s", l)
		if strings.Contains(l, `"role":"admin"`) || !strings.Contains(l, `"role":"node"`) ||
			!strings.Contains(l, `"admitted":false`) {
			t.Errorf("audit line for node %s: %s", id, l)
		}
	}
}
