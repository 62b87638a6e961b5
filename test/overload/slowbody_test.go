package overload

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// slowConns is the slowloris of issue 22, deliverable 5: more connections
// than a node's 128 decision slots, each sending the headers of an
// :evaluate with Content-Length 1000 and then one byte of it.
const slowConns = 136

// TestSlowBodiesKeepDecisions (issue 22, deliverable 5): a decision took
// its slot before its body was read, so 128 connections trickling bodies
// refused every decision on a node (503) for up to 30 s. Now a node keeps
// deciding :evaluate and :authorize from other addresses while 136 slow
// bodies arrive from 127.0.0.2, and answers each slow body itself (503
// past the per-source cap, 408 past the body deadline).
func TestSlowBodiesKeepDecisions(t *testing.T) {
	repo := harness.NewRepo(t, harness.RepoOptions{})
	c := harness.StartCluster(t, harness.ClusterOptions{Size: 1, Repo: repo})
	c.WaitServing(0, nil, time.Minute)
	n := c.Nodes[0]
	began := time.Now()
	conns := openSlowBodies(t, n.HTTPAddr, slowConns)
	deadline := time.Now().Add(20 * time.Second)
	for seen := countDecisionWork(t, c, n); seen < slowConns; seen = countDecisionWork(t, c, n) {
		if time.Now().After(deadline) {
			t.Fatalf("the node took in %d of %d slow bodies", seen, slowConns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d, err := c.Client.Probe(n); err != nil {
		t.Errorf(":evaluate during %d slow bodies: %v", slowConns, err)
	} else {
		t.Logf(":evaluate during the slow bodies: %s by %q", d.Decision, d.Rule)
	}
	code, h := authorize(t, n)
	if (code != http.StatusOK && code != http.StatusForbidden) || h.Get("X-Policy-Error") != "" {
		t.Errorf(":authorize during %d slow bodies: %d %v", slowConns, code, h)
	}
	answers := map[string]int{}
	for _, conn := range conns {
		answers[statusOf(conn)]++
	}
	t.Logf("%d slow bodies from 127.0.0.2 answered in %v: %v", slowConns, time.Since(began).Round(time.Millisecond), answers)
	if answers["408"]+answers["503"] != slowConns {
		t.Errorf("slow bodies answered %v, want each 408 or 503", answers)
	}
}

// openSlowBodies dials n connections to addr from 127.0.0.2 (on Linux all
// of 127.0.0.0/8 is local) and starts a slow :evaluate body on each.
func openSlowBodies(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dialing from 127.0.0.2: %v", err)
		}
		conns = append(conns, conn)
		if _, err := fmt.Fprintf(conn, "POST /v1/policies/%s:evaluate HTTP/1.1\r\nHost: node\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", harness.Policy); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// countDecisionWork is what the node has done with the decision requests
// it was sent: shed (any form or reason), in flight, or reading a body.
func countDecisionWork(t *testing.T, c *harness.Cluster, n *harness.Node) int {
	t.Helper()
	code, body, err := c.Client.Get(n.Base() + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(name, "reconciler_decisions_shed_total{") || name == "reconciler_decisions_in_flight" ||
			name == "reconciler_decision_bodies_reading" {
			v, _ := strconv.ParseFloat(value, 64)
			total += v
		}
	}
	return int(total)
}

// authorize sends one :authorize gateway check to n.
func authorize(t *testing.T, n *harness.Node) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.Base()+"/v1/policies/"+harness.Policy+":authorize/healthz", nil)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf(":authorize: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// statusOf reads the status code the node answered on conn.
func statusOf(conn net.Conn) string {
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "no answer"
	}
	if f := strings.Fields(line); len(f) > 1 {
		return f[1]
	}
	return "bad answer"
}
