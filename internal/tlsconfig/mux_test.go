package tlsconfig_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// attacker is a source address of its own on loopback: Linux routes all
// of 127.0.0.0/8 locally, so a flood from 127.0.0.2 and the nodes on
// 127.0.0.1 are two sources as they would be on a network.
var attacker = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// silentFlood opens n TCP connections to addr from 127.0.0.2 and sends
// nothing on them (issue 22, finding 4); they close with the test. It
// returns those the node had not reset by the time connect returned.
func silentFlood(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: attacker, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := d.Dial("tcp", addr)
		if errors.Is(err, syscall.ECONNRESET) {
			continue // refused at once
		}
		if err != nil {
			t.Fatalf("flood: %v", err)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return conns
}

// TestSilentFloodDoesNotLockOutNodes is issue 22's finding 4: 300 silent
// TCP connections from one address (no certificate needed) took all 256
// handshake slots of the node port, and no node could connect until they
// timed out. Now one address holds at most its own share of the slots,
// each for about a second, and nodes from another address still connect.
func TestSilentFloodDoesNotLockOutNodes(t *testing.T) {
	dir := newCluster(t, "n1", "n2")
	addr := serveMux(t, newNode(t, dir, "n1", nil), testlog.New(t))
	flood := silentFlood(t, addr, 300)
	client := newNode(t, dir, "n2", nil)
	ok := 0
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := client.Dial(ctx, addr, tlsconfig.ProtoRaft, "n1")
		cancel()
		if err != nil {
			t.Logf("node dial %d during the flood: %v", i, err)
			continue
		}
		if got := readLine(t, c); got == "hello n2\n" {
			ok++
		}
		_ = c.Close()
	}
	if ok != 10 {
		t.Fatalf("%d of 10 node connections completed while 300 silent connections were open", ok)
	}
	// The flood's connections are dropped by the node, not kept.
	start := time.Now()
	var wg sync.WaitGroup
	dropped := make([]bool, len(flood))
	for i, c := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			dropped[i] = err != nil && !(errors.As(err, &ne) && ne.Timeout())
		}()
	}
	wg.Wait()
	for i, d := range dropped {
		if !d {
			t.Fatalf("silent connection %d was still open after 20 s", i)
		}
	}
	t.Logf("all %d silent connections dropped by the node within %v", len(flood), time.Since(start).Round(time.Millisecond))
}
