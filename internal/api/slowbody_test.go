package api

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowBodies opens n connections to addr from 127.0.0.2 (on Linux all of
// 127.0.0.0/8 is local) and on each sends the headers of an :evaluate
// with Content-Length 1000 and then a single byte of the body: the
// slowloris of issue 22, deliverable 5. The connections close at cleanup.
func slowBodies(t *testing.T, addr string, n int) []net.Conn {
	return slowBodiesFrom(t, addr, n, 1)
}

// slowBodiesFrom is slowBodies from sources addresses, 127.0.0.2 onwards.
func slowBodiesFrom(t *testing.T, addr string, n, sources int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		local := net.IPv4(127, 0, 0, byte(2+i%sources))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dialing from 127.0.0.2: %v", err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "POST /v1/policies/web:evaluate HTTP/1.1\r\nHost: node\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// startedServer serves srv on loopback and counts the requests its
// handler has started, so that a test knows every slow body has reached
// the API before it measures.
func startedServer(t *testing.T, srv *Server) (*httptest.Server, *atomic.Int64) {
	started := new(atomic.Int64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, started
}

// TestSlowBodiesDoNotTakeDecisions (issue 22, deliverable 5): a decision
// took its in-flight slot before its body was read, so 128 connections
// each sending one byte of a body held every slot (for up to the server's
// 30 s read timeout) and every other decision on the node, :authorize
// included, got 503. A normal :evaluate and :authorize from another
// address must be decided while the slow bodies are held, whether they
// come from one address or from as many as there are.
func TestSlowBodiesDoNotTakeDecisions(t *testing.T) {
	const slow = DefaultMaxDecisionsInFlight + 8
	for _, sources := range []int{1, slow} {
		t.Run(fmt.Sprintf("%d-sources", sources), func(t *testing.T) { slowBodyAttack(t, slow, sources) })
	}
}

// slowBodyAttack holds slow bodies from sources addresses while a normal
// :evaluate, :authorize and :mirror are sent from 127.0.0.1.
func slowBodyAttack(t *testing.T, slow, sources int) {
	e := newTestEnv(t, Config{Now: fixedNow})
	hs, started := startedServer(t, e.srv)
	slowBodiesFrom(t, hs.Listener.Addr().String(), slow, sources)
	waitFor(t, "every slow body in the API", func() bool { return started.Load() == int64(slow) })
	t.Logf("during the attack: %d decisions in flight, %d bodies being read", e.srv.dec.inflight.n.Load(), e.srv.dec.bodies.total.Load())

	e.http = hs
	if a := e.post("/v1/policies/web:evaluate", `{"method":"GET","path":"/healthz"}`); a.code != http.StatusOK {
		t.Errorf(":evaluate during %d slow bodies: %d %s", slow, a.code, a.body)
	}
	if a := e.do(http.MethodGet, "/v1/policies/web:authorize/healthz", nil, nil); a.code != http.StatusOK {
		t.Errorf(":authorize during %d slow bodies: %d %v", slow, a.code, a.header)
	}
	if a := e.do(http.MethodGet, "/v1/policies/web:mirror/healthz", nil, nil); a.code != http.StatusNoContent {
		t.Errorf(":mirror during %d slow bodies: %d %s", slow, a.code, a.body)
	}
}

// readStatus reads the status line a server answered on c.
func readStatus(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(line)
}

// metricsHave checks the node's /metrics has every line.
func metricsHave(t *testing.T, e *testEnv, lines ...string) {
	t.Helper()
	metrics := string(e.do(http.MethodGet, "/metrics", nil, nil).body)
	for _, line := range lines {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestSlowBodiesBounded: what now bounds the bodies being read. One
// address reads at most max_decision_bodies_per_source at once (503 with
// Retry-After past it, while another address is decided); a body still
// arriving after the deadline is answered 408; each is counted as shed
// with its reason, and nothing stays charged once they are gone.
func TestSlowBodiesBounded(t *testing.T) {
	e := newTestEnv(t, Config{Now: fixedNow, MaxDecisionBodiesPerSource: 2, DecisionBodyTimeout: 300 * time.Millisecond})
	hs, started := startedServer(t, e.srv)
	e.http = hs
	conns := slowBodies(t, hs.Listener.Addr().String(), 3)
	waitFor(t, "the slow bodies in the API", func() bool { return started.Load() == 3 })
	if a := e.post("/v1/policies/web:evaluate", `{"method":"GET","path":"/healthz"}`); a.code != http.StatusOK {
		t.Errorf(":evaluate from another address: %d %s", a.code, a.body)
	}
	statuses := map[string]int{}
	for _, c := range conns {
		statuses[readStatus(t, c)]++
	}
	t.Logf("the slow bodies were answered %v", statuses)
	if statuses["HTTP/1.1 503 Service Unavailable"] != 1 || statuses["HTTP/1.1 408 Request Timeout"] != 2 {
		t.Errorf("3 slow bodies from one address with a cap of 2: answers %v, want one 503 and two 408", statuses)
	}
	waitFor(t, "no body charged", func() bool { return e.srv.dec.bodies.buffered.Load() == 0 && e.srv.dec.bodies.total.Load() == 0 })
	metricsHave(t, e, `reconciler_decisions_shed_total{form="evaluate",reason="source_bodies"} 1`,
		`reconciler_decisions_shed_total{form="evaluate",reason="body_timeout"} 2`,
		"reconciler_decision_bodies_reading 0", "reconciler_decision_body_bytes 0")
}

// TestDecisionBodyBudget: body bytes are charged as they arrive; past the
// budget a body is refused 503 with Retry-After, and once the bytes held
// are given back the same body is decided.
func TestDecisionBodyBudget(t *testing.T) {
	const budget = 64
	e := newTestEnv(t, Config{Now: fixedNow, DecisionBodyBudget: budget})
	hs, _ := startedServer(t, e.srv)
	e.http = hs
	held := slowBodies(t, hs.Listener.Addr().String(), 1)[0]
	if _, err := held.Write([]byte(strings.Repeat(" ", 40))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the held bytes charged", func() bool { return e.srv.dec.bodies.buffered.Load() == 41 })
	body := `{"method":"GET","path":"/healthz"}` // 35 bytes: over what is left
	a := e.post("/v1/policies/web:mirror", body)
	wantError(t, a, http.StatusServiceUnavailable, "UNAVAILABLE")
	if a.header.Get("Retry-After") != "1" || !strings.Contains(string(a.body), "bytes of decision bodies") {
		t.Errorf("past the budget: Retry-After %q, %s", a.header.Get("Retry-After"), a.body)
	}
	metricsHave(t, e, `reconciler_decisions_shed_total{form="mirror",reason="body_budget"} 1`, "reconciler_decision_body_bytes 41")
	held.Close()
	waitFor(t, "the held bytes given back", func() bool { return e.srv.dec.bodies.buffered.Load() == 0 })
	if a := e.post("/v1/policies/web:evaluate", body); a.code != http.StatusOK {
		t.Errorf("within the budget again: %d %s", a.code, a.body)
	}
}
