package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// startMux serves a mux for node n1 of a new cluster with lim, keeping
// every accepted raft connection open until its client closes it. It
// returns the mux and a dialer for other node ids.
func startMux(t *testing.T, lim limits) (*Mux, func(id string) (net.Conn, error)) {
	t.Helper()
	dir := t.TempDir()
	if err := CreateCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*Node{}
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := CreateNode(dir, id, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		n, err := NewNode(Config{Files: DirFiles(dir, id)})
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, nodes["n1"], testlog.New(t), lim)
	t.Cleanup(func() { _ = m.Close() })
	go func() {
		for {
			c, err := m.Listener(ProtoRaft).Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
		}
	}()
	return m, func(id string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return nodes[id].Dial(ctx, ln.Addr().String(), ProtoRaft, "n1")
	}
}

// waitStats waits until the mux's stats satisfy ok.
func waitStats(t *testing.T, m *Mux, ok func(MuxStats) bool) MuxStats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := m.Stats()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never got there: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// open reports whether the server still holds c (nil: reset while
// connecting): a read sees no end of stream before a short deadline.
func open(c net.Conn) bool {
	if c == nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestMuxBoundsConnectionsPerNode(t *testing.T) {
	lim := defaultLimits()
	lim.perNode = 3
	m, dial := startMux(t, lim)
	var conns []net.Conn
	for range 4 {
		c, err := dial("n2") // TLS 1.3: the client is done before the server has checked it
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// The server checks handshakes concurrently, so which of the four is
	// refused depends on the order they finish in: exactly one is, once
	// the server has counted the refusal.
	s := waitStats(t, m, func(s MuxStats) bool { return s.Refused[RefusedNodeConnections] == 1 })
	var kept []net.Conn
	for _, c := range conns {
		if open(c) {
			kept = append(kept, c)
		}
	}
	if len(kept) != 3 {
		t.Errorf("%d of n2's 4 connections are open; the bound is 3", len(kept))
	}
	if s.Connections != 3 {
		t.Errorf("stats %+v, want 3 connections", s)
	}
	// Another node has its own bound; a closed connection gives its slot back.
	if c, err := dial("n3"); err != nil || !open(c) {
		t.Errorf("n3 was refused while n2 had its fill: %v", err)
	}
	if len(kept) == 0 {
		t.FailNow()
	}
	_ = kept[0].Close()
	waitStats(t, m, func(s MuxStats) bool { return s.Connections == 3 })
	if c, err := dial("n2"); err != nil || !open(c) {
		t.Errorf("n2 refused after closing one of its connections: %v", err)
	}
}

func TestMuxBoundsHandshakesPerSourceAndInAll(t *testing.T) {
	lim := defaultLimits()
	lim.perSource, lim.handshakes, lim.hello = 2, 3, time.Minute // held until the test ends
	m, _ := startMux(t, lim)
	from := func(ip byte) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}
		c, err := d.Dial("tcp", m.Addr().String())
		if errors.Is(err, syscall.ECONNRESET) {
			return nil // refused before connect returned
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	want := []struct {
		ip      byte
		refused string
	}{{2, ""}, {2, ""}, {2, RefusedSourceHandshakes}, {3, ""}, {4, RefusedHandshakes}}
	for i, w := range want {
		c := from(w.ip)
		s := waitStats(t, m, func(s MuxStats) bool {
			var n uint64
			for _, v := range s.Refused {
				n += v
			}
			return int(n)+s.Handshakes == i+1
		})
		if got := open(c); got != (w.refused == "") {
			t.Errorf("connection %d from 127.0.0.%d: open %v, want refused for %q", i, w.ip, got, w.refused)
		}
		if w.refused != "" && s.Refused[w.refused] != 1 {
			t.Errorf("connection %d from 127.0.0.%d: stats %+v, want one refusal for %s", i, w.ip, s, w.refused)
		}
	}
}

func TestMuxDropsSilentAndStalledHandshakes(t *testing.T) {
	lim := defaultLimits()
	lim.hello, lim.handshake = 200*time.Millisecond, time.Second
	m, _ := startMux(t, lim)
	silent, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A client that sends its ClientHello, then never its certificate.
	stall := make(chan struct{})
	defer close(stall)
	raw, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	stalled := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ProtoRaft}, //nolint:gosec // the attacker
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			<-stall
			return nil, fmt.Errorf("stalled")
		}})
	go func() { _ = stalled.Handshake() }()
	s := waitStats(t, m, func(s MuxStats) bool {
		return s.Refused[RefusedHelloTimeout] == 1 && s.Refused[RefusedHandshakeTimeout] == 1
	})
	if s.Handshakes != 0 {
		t.Errorf("stats %+v: handshake slots not given back", s)
	}
	if open(silent) {
		t.Error("the silent connection is still open")
	}
}

// TestDefaultLimitsFitANode: a legitimate node, which opens at most
// maxNodeConns connections to another, never meets a default bound.
func TestDefaultLimitsFitANode(t *testing.T) {
	lim := defaultLimits()
	if maxNodeConns > lim.perSource || 2*maxNodeConns > lim.perNode || lim.perSource >= lim.handshakes {
		t.Errorf("a node opens up to %d connections; limits %+v", maxNodeConns, lim)
	}
	if lim.hello >= lim.handshake {
		t.Errorf("the ClientHello deadline %v is not shorter than the handshake's %v", lim.hello, lim.handshake)
	}
}

func TestSourceOf(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.2:1":               "127.0.0.2/32",
		"[::ffff:10.0.0.1]:1":       "10.0.0.1/32",
		"[2001:db8:1:2:3:4:5:6]:1":  "2001:db8:1:2::/64",
		"[2001:db8:1:2:ff::1]:9999": "2001:db8:1:2::/64",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sourceOf(a); got != netip.MustParsePrefix(want) {
			t.Errorf("sourceOf(%s) = %s, want %s", addr, got, want)
		}
	}
	if got := sourceOf(&net.UnixAddr{Name: "x"}); got.IsValid() {
		t.Errorf("a non-TCP address has source %s", got)
	}
}

// TestMuxCloseEndsHandshakes: closing the port ends the handshakes in
// progress at once, without counting them as refusals.
func TestMuxCloseEndsHandshakes(t *testing.T) {
	lim := defaultLimits()
	lim.hello = time.Minute
	m, _ := startMux(t, lim)
	c, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitStats(t, m, func(s MuxStats) bool { return s.Handshakes == 1 })
	_ = m.Close()
	s := waitStats(t, m, func(s MuxStats) bool { return s.Handshakes == 0 })
	if len(s.Refused) != 0 {
		t.Errorf("stats %+v: a handshake Close ended was counted as refused", s)
	}
	if open(c) {
		t.Error("the connection is still open after Close")
	}
}
