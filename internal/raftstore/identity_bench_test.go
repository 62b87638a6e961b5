package raftstore

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// fixedConfig is a configSource that always knows the same servers.
type fixedConfig []raft.Server

func (f fixedConfig) GetConfiguration() raft.ConfigurationFuture { return configFuture{f} }

type configFuture struct{ servers []raft.Server }

func (c configFuture) Error() error  { return nil }
func (c configFuture) Index() uint64 { return 1 }
func (c configFuture) Configuration() raft.Configuration {
	return raft.Configuration{Servers: c.servers}
}

// BenchmarkAppendEntriesTLS measures AppendEntries round trips (16
// entries of 1 KiB each, raft's batch size here) from a follower-facing
// NetworkTransport to a node port over mutual TLS on loopback, answered
// at once by a stand-in for raft: through raft's plain NetworkTransport
// ("plain", before issue 22) and through the idTransport that checks
// every RPC against the certificate and the configuration ("identity").
func BenchmarkAppendEntriesTLS(b *testing.B) {
	for _, identity := range []bool{false, true} {
		name := "plain"
		if identity {
			name = "identity"
		}
		b.Run(name, func(b *testing.B) { benchAppend(b, identity) })
	}
}

func benchAppend(b *testing.B, identity bool) {
	dir := b.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		b.Fatal(err)
	}
	nodes := map[string]*tlsconfig.Node{}
	for _, id := range []string{"n0", "n1"} {
		if _, err := tlsconfig.CreateNode(dir, id, nil, time.Hour); err != nil {
			b.Fatal(err)
		}
		n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, id)})
		if err != nil {
			b.Fatal(err)
		}
		nodes[id] = n
	}
	server := benchServer(b, nodes["n0"], identity)
	client := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: DialOnly(func(ctx context.Context, addr string) (net.Conn, error) {
			return nodes["n1"].Dial(ctx, addr, tlsconfig.ProtoRaft, "n0")
		}), MaxPool: 3, Timeout: 10 * time.Second, Logger: hclog.NewNullLogger()})
	defer client.Close()
	req := &raft.AppendEntriesRequest{Term: 1, RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
		ID: []byte("n1"), Addr: []byte("127.0.0.1:1")}, LeaderCommitIndex: 1}
	for i := range 16 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: make([]byte, 1024)})
	}
	b.SetBytes(16 * 1024)
	b.ResetTimer()
	for range b.N {
		var resp raft.AppendEntriesResponse
		if err := client.AppendEntries("n0", raft.ServerAddress(server), req, &resp); err != nil || !resp.Success {
			b.Fatalf("append: %v %+v", err, resp)
		}
	}
}

// benchServer serves raft on a TLS node port and answers every RPC with
// success; it returns the address.
func benchServer(b *testing.B, n *tlsconfig.Node, identity bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	mux := tlsconfig.NewMux(ln, n, nil)
	b.Cleanup(func() { _ = mux.Close() })
	raftLn := mux.Listener(tlsconfig.ProtoRaft)
	cfg := Config{Logger: hclog.NewNullLogger()}
	var trans raft.Transport
	if identity {
		cfg.StreamLayer = NewIdentityStreamLayer(raftLn, nil, Identity{PeerID: tlsconfig.ConnPeerID,
			Dial: func(ctx context.Context, addr, id string) (net.Conn, error) {
				return n.Dial(ctx, addr, tlsconfig.ProtoRaft, id)
			}})
		it := newStreamTransport(cfg).(*idTransport)
		it.setSource(fixedConfig{{ID: "n0", Address: "127.0.0.1:0"}, {ID: "n1", Address: "127.0.0.1:1"}})
		trans = it
	} else {
		cfg.StreamLayer = NewStreamLayer(raftLn, nil, nil)
		trans = newStreamTransport(cfg)
	}
	done := make(chan struct{})
	b.Cleanup(func() { close(done); _ = closeTransport(trans) })
	go func() {
		for {
			select {
			case rpc := <-trans.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	return ln.Addr().String()
}

// BenchmarkCheckRPC is the check every incoming RPC pays, against a
// configuration of five servers, apart from the hand-over between
// goroutines.
func BenchmarkCheckRPC(b *testing.B) {
	var servers fixedConfig
	for i := range 5 {
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)),
			Address: raft.ServerAddress(fmt.Sprintf("10.0.0.%d:8300", i))})
	}
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n4"), Addr: []byte("10.0.0.4:8300")}}
	b.ReportAllocs()
	for range b.N {
		if err := checkRPC("n4", req, servers.GetConfiguration().Configuration().Servers); err != nil {
			b.Fatal(err)
		}
	}
}
