package extauthz

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// h2Frame writes one HTTP/2 frame.
func h2Frame(t *testing.T, c net.Conn, typ, flags byte, stream uint32, payload []byte) {
	t.Helper()
	hdr := make([]byte, 9)
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	if _, err := c.Write(append(hdr, payload...)); err != nil {
		t.Fatal(err)
	}
}

// hpackLiteral is a header field as an HPACK literal without indexing
// (short name and value, no Huffman coding).
func hpackLiteral(name, value string) []byte {
	b := []byte{0, byte(len(name))}
	b = append(b, name...)
	b = append(b, byte(len(value)))
	return append(b, value...)
}

// slowCheck opens a raw HTTP/2 connection to addr and starts a Check whose
// gRPC message announces 1000 bytes and sends 10: a slow client. It
// returns once the server has read those frames (its PING answered).
func slowCheck(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h2Frame(t, c, 0x4, 0, 0, nil) // SETTINGS
	var block []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/envoy.service.auth.v3.Authorization/Check"},
		{":authority", "node"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		block = append(block, hpackLiteral(kv[0], kv[1])...)
	}
	h2Frame(t, c, 0x1, 0x4, 1, block)  // HEADERS, END_HEADERS
	msg := []byte{0, 0, 0, 0x03, 0xe8} // not compressed, 1000 bytes
	h2Frame(t, c, 0x0, 0, 1, append(msg, make([]byte, 10)...))
	h2Frame(t, c, 0x6, 0, 0, []byte("slowpeer")) // PING
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		hdr := make([]byte, 9)
		if _, err := io.ReadFull(c, hdr); err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(c, payload); err != nil {
			t.Fatal(err)
		}
		switch {
		case hdr[3] == 0x4 && hdr[4]&1 == 0:
			h2Frame(t, c, 0x4, 1, 0, nil) // SETTINGS ACK
		case hdr[3] == 0x6 && hdr[4]&1 == 1:
			return c
		}
	}
}

// TestSlowCheckHoldsNoSlot (issue 22, deliverable 5): gRPC delivers a
// Check's message inside the handler's decode, and the handler took its
// decision slot before it: a client that sent a Check's message slowly
// held a slot as long as it liked. With one slot, a Check must be
// answered while a slow one is arriving.
func TestSlowCheckHoldsNoSlot(t *testing.T) {
	g := &gens{}
	g.set(7, testBundle(t))
	a := api.New(api.Config{Generations: g, Logger: testlog.New(t), TrustedProxies: trusted, MaxDecisionsInFlight: 1})
	s := New(Config{Addr: "127.0.0.1:0", Authorizer: a, Logger: testlog.New(t)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	hs := startHTTP(t, a)
	slowCheck(t, s.Addr())
	// The slow Check's handler starts once its frames are read; give it the
	// moment it takes to reach its slot, as it did before the fix.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(scrape(t, hs), "reconciler_decisions_in_flight 1\n") {
			t.Log("the slow Check holds a decision slot")
			break
		}
	}
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, checkReq{method: "GET", path: "/healthz", host: "h", source: "203.0.113.9"}.proto())
	if err != nil || headersOfResponse(resp)["x-policy-error"] != "" {
		t.Errorf("a Check while a slow one arrives: %v %v", resp.GetStatus(), err)
	}
}

// checkFrom sends a Check to addr from the local address from.
func checkFrom(t *testing.T, addr, from string) (*authv3.CheckResponse, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return authv3.NewAuthorizationClient(conn).Check(ctx, checkReq{method: "GET", path: "/healthz", host: "h", source: "203.0.113.9"}.proto())
}

// TestSlowChecksPerSource: Checks being received count with the HTTP
// decision bodies of their address, within
// [api] max_decision_bodies_per_source, so that one address cannot hold
// unbounded messages being received; another address is answered.
func TestSlowChecksPerSource(t *testing.T) {
	g := &gens{}
	g.set(7, testBundle(t))
	a := api.New(api.Config{Generations: g, Logger: testlog.New(t), TrustedProxies: trusted, MaxDecisionBodiesPerSource: 1})
	s := New(Config{Addr: "127.0.0.1:0", Authorizer: a, Logger: testlog.New(t)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	hs := startHTTP(t, a)
	slowCheck(t, s.Addr()) // from 127.0.0.1
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(scrape(t, hs), "reconciler_decision_bodies_reading 1\n"); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow Check is never counted as being received")
		}
	}
	_, err := checkFrom(t, s.Addr(), "127.0.0.1")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "max_decision_bodies_per_source") {
		t.Errorf("a second Check from the slow address: %v, want UNAVAILABLE", err)
	}
	if resp, err := checkFrom(t, s.Addr(), "127.0.0.2"); err != nil || headersOfResponse(resp)["x-policy-error"] != "" {
		t.Errorf("a Check from another address: %v %v", resp.GetStatus(), err)
	}
	if !strings.Contains(scrape(t, hs), `reconciler_decisions_shed_total{form="check",reason="source_bodies"} 1`+"\n") {
		t.Error("the refused Check is not counted")
	}
}
