package raftstore

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

func TestCheckRPC(t *testing.T) {
	servers := []raft.Server{{ID: "n1", Address: "10.0.0.1:8300"}, {ID: "n2", Address: "10.0.0.2:8300"}}
	hdr := func(id, addr string) raft.RPCHeader { return raft.RPCHeader{ID: []byte(id), Addr: []byte(addr)} }
	for _, tc := range []struct {
		name    string
		cert    string
		cmd     any
		servers []raft.Server
		want    error
	}{
		{"the member as itself", "n1", &raft.AppendEntriesRequest{RPCHeader: hdr("n1", "10.0.0.1:8300")}, servers, nil},
		{"no address in the header", "n2", &raft.RequestVoteRequest{RPCHeader: hdr("n2", "")}, servers, nil},
		{"a node that never joined", "n9", &raft.AppendEntriesRequest{RPCHeader: hdr("n9", "10.0.0.9:8300")}, servers, ErrNotMember},
		{"a non-member claiming a member", "n9", &raft.AppendEntriesRequest{RPCHeader: hdr("n1", "10.0.0.1:8300")}, servers, ErrWrongIdentity},
		{"a member claiming another", "n2", &raft.AppendEntriesRequest{RPCHeader: hdr("n1", "10.0.0.1:8300")}, servers, ErrWrongIdentity},
		{"a member claiming another's address", "n2", &raft.RequestVoteRequest{RPCHeader: hdr("n2", "10.0.0.1:8300")}, servers, ErrWrongIdentity},
		{"the deprecated leader field", "n2", &raft.AppendEntriesRequest{RPCHeader: hdr("n2", ""), Leader: []byte("10.0.0.1:8300")}, servers, ErrWrongIdentity},
		{"the deprecated candidate field", "n2", &raft.RequestVoteRequest{RPCHeader: hdr("n2", ""), Candidate: []byte("10.0.0.1:8300")}, servers, ErrWrongIdentity},
		{"an anonymous header", "n2", &raft.TimeoutNowRequest{RPCHeader: hdr("", "")}, servers, ErrWrongIdentity},
		{"a snapshot from a removed node", "n3", &raft.InstallSnapshotRequest{RPCHeader: hdr("n3", "10.0.0.3:8300")}, servers, ErrNotMember},
		{"a node that has not joined accepts its leader", "n1", &raft.AppendEntriesRequest{RPCHeader: hdr("n1", "10.0.0.1:8300")}, nil, nil},
		{"... but not one claiming another id", "n9", &raft.AppendEntriesRequest{RPCHeader: hdr("n1", "10.0.0.1:8300")}, nil, ErrWrongIdentity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRPC(tc.cert, tc.cmd, tc.servers)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("checkRPC = %v, want %v", err, tc.want)
			}
		})
	}
}

// tlsCluster is three Stores speaking raft over mutual TLS with
// NewIdentityStreamLayer, as a node with [tls] does.
type tlsCluster struct {
	dir    string
	ids    []string
	stores []*Store
	logs   []*testlog.Buffer
}

func startTLSCluster(t *testing.T) *tlsCluster {
	c := &tlsCluster{dir: t.TempDir(), ids: []string{"n0", "n1", "n2"}}
	if err := tlsconfig.CreateCA(c.dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	for i, id := range append(c.ids, "n9") {
		if _, err := tlsconfig.CreateNode(c.dir, id, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		if i < len(c.ids) {
			c.open(t, id, i == 0)
		}
	}
	for _, s := range c.stores[1:] {
		if err := waitLeader(t, c.stores).AddVoter(s.ID(), s.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *tlsCluster) open(t *testing.T, id string, bootstrap bool) {
	buf := &testlog.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn,
		Output: io.MultiWriter(buf, testlog.Writer(t, ""))})
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(c.dir, id)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := tlsconfig.NewMux(ln, n, logger)
	t.Cleanup(func() { _ = mux.Close() })
	sl := NewIdentityStreamLayer(mux.Listener(tlsconfig.ProtoRaft), nil, Identity{
		PeerID: tlsconfig.ConnPeerID,
		Dial: func(ctx context.Context, addr, want string) (net.Conn, error) {
			return n.Dial(ctx, addr, tlsconfig.ProtoRaft, want)
		},
	})
	s, err := Open(Config{NodeID: id, StreamLayer: sl, InMemory: true, Bootstrap: bootstrap,
		Timeouts: testTimeouts, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c.stores = append(c.stores, s)
	c.logs = append(c.logs, buf)
}

// dialAs dials a node port with certID's certificate; conns receives
// every connection it makes.
func (c *tlsCluster) dialAs(t *testing.T, certID string, conns chan<- net.Conn) DialFunc {
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(c.dir, certID)})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := n.Dial(ctx, addr, tlsconfig.ProtoRaft, "")
		if err == nil && conns != nil {
			conns <- conn
		}
		return conn, err
	}
}

// attackTerm is far above any term the test cluster reaches.
const attackTerm = 1 << 40

// sendAs sends one AppendEntries of attackTerm with hdr to addr over
// dial: a node that accepts it takes the attacker as its leader.
func sendAs(dial DialFunc, addr string, hdr raft.RPCHeader, term uint64) error {
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: DialOnly(dial), MaxPool: 1, Timeout: 5 * time.Second, Logger: hclog.NewNullLogger()})
	defer trans.Close()
	hdr.ProtocolVersion = raft.ProtocolVersionMax
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries(raft.ServerID(hdr.ID), raft.ServerAddress(addr),
		&raft.AppendEntriesRequest{RPCHeader: hdr, Term: term}, &resp)
}

func term(s *Store) uint64 {
	n, _ := strconv.ParseUint(s.Stats()["term"], 10, 64)
	return n
}

// TestIdentityTransportRefusesOtherNodes: over mutual TLS, raft takes an
// RPC only from a current member speaking for the node its certificate
// names. A certificate of a node that never joined, a member's claiming
// another id or address, and a member's after its removal are refused and
// logged; none moves a node's term; the cluster keeps replicating.
func TestIdentityTransportRefusesOtherNodes(t *testing.T) {
	c := startTLSCluster(t)
	leader := waitLeader(t, c.stores)
	var followers []*Store
	for _, s := range c.stores {
		if s != leader {
			followers = append(followers, s)
		}
	}
	member, removed := followers[0], followers[1]
	asLeader := raft.RPCHeader{ID: []byte(leader.ID()), Addr: []byte(leader.Addr())}
	for _, v := range c.stores {
		for name, err := range map[string]error{
			"n9, never joined, as itself":  sendAs(c.dialAs(t, "n9", nil), v.Addr(), raft.RPCHeader{ID: []byte("n9")}, attackTerm),
			"n9 claiming the leader":       sendAs(c.dialAs(t, "n9", nil), v.Addr(), asLeader, attackTerm),
			"a member claiming the leader": sendAs(c.dialAs(t, member.ID(), nil), v.Addr(), asLeader, attackTerm),
			"a member claiming the leader's address": sendAs(c.dialAs(t, member.ID(), nil), v.Addr(),
				raft.RPCHeader{ID: []byte(member.ID()), Addr: []byte(leader.Addr())}, attackTerm),
		} {
			if err == nil {
				t.Errorf("%s accepted %s", v.ID(), name)
			}
		}
	}
	removeAndCheckClosed(t, c, leader, removed)
	for i, s := range c.stores {
		if s == removed {
			continue
		}
		if got := term(s); got >= attackTerm {
			t.Errorf("%s is at the attacker's term %d", s.ID(), got)
		}
		if !strings.Contains(c.logs[i].String(), "refused a raft connection") {
			t.Errorf("%s did not log the refusals:\n%s", s.ID(), c.logs[i].String())
		}
	}
	res, err := leader.Propose(ctxT(t), stage(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := member.WaitForIndex(ctxT(t), res.Index); err != nil {
		t.Errorf("%s: %v", member.ID(), err)
	}
}

// removeAndCheckClosed: a member holds an open raft connection to the
// leader (its RPC is answered); once removed, that connection is closed
// and a new one is refused.
func removeAndCheckClosed(t *testing.T, c *tlsCluster, leader, removed *Store) {
	t.Helper()
	conns := make(chan net.Conn, 4)
	self := raft.RPCHeader{ID: []byte(removed.ID()), Addr: []byte(removed.Addr())}
	if err := sendAsPooled(t, c.dialAs(t, removed.ID(), conns), leader.Addr(), self); err != nil {
		t.Fatalf("the member %s's own RPC was refused: %v", removed.ID(), err)
	}
	open := <-conns
	if err := leader.RemoveServer(removed.ID()); err != nil {
		t.Fatal(err)
	}
	_ = open.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s's open connection to the leader after its removal: read = %v, want closed", removed.ID(), err)
	}
	if err := sendAs(c.dialAs(t, removed.ID(), nil), leader.Addr(), self, attackTerm); err == nil {
		t.Errorf("the leader accepted an RPC from %s after its removal", removed.ID())
	}
}

// sendAsPooled sends a harmless AppendEntries (term 0) and leaves the
// transport, and so its connection, open until the test ends.
func sendAsPooled(t *testing.T, dial DialFunc, addr string, hdr raft.RPCHeader) error {
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: DialOnly(dial), MaxPool: 1, Timeout: 5 * time.Second, Logger: hclog.NewNullLogger()})
	t.Cleanup(func() { _ = trans.Close() })
	hdr.ProtocolVersion = raft.ProtocolVersionMax
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries(raft.ServerID(hdr.ID), raft.ServerAddress(addr), &raft.AppendEntriesRequest{RPCHeader: hdr}, &resp)
}

// TestIdentityTransportLeaderRemovesItself: the followers stop taking the
// old leader's RPCs once they have appended its removal, and still elect
// a leader among themselves that commits.
func TestIdentityTransportLeaderRemovesItself(t *testing.T) {
	c := startTLSCluster(t)
	old := waitLeader(t, c.stores)
	if err := old.RemoveServer(old.ID()); err != nil {
		t.Fatal(err)
	}
	var rest []*Store
	for _, s := range c.stores {
		if s != old {
			rest = append(rest, s)
		}
	}
	leader := waitLeader(t, rest)
	res, err := leader.Propose(ctxT(t), stage(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rest {
		if err := s.WaitForIndex(ctxT(t), res.Index); err != nil {
			t.Errorf("%s: %v", s.ID(), err)
		}
		servers, err := s.Servers()
		if err != nil || len(servers) != 2 {
			t.Errorf("%s: servers %v, %v", s.ID(), servers, err)
		}
	}
}

// TestIdentityTransportDialsTheMember: raft dials an address of its
// configuration; a server there whose certificate names another node (an
// address taken over) is refused before any RPC is sent.
func TestIdentityTransportDialsTheMember(t *testing.T) {
	c := &tlsCluster{dir: t.TempDir()}
	if err := tlsconfig.CreateCA(c.dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n0", "n1", "n9"} {
		if _, err := tlsconfig.CreateNode(c.dir, id, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	c.open(t, "n9", true) // listens where the configuration expects n1
	taken := c.stores[0].Addr()
	n0, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(c.dir, "n0")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := tlsconfig.NewMux(ln, n0, nil)
	t.Cleanup(func() { _ = mux.Close() })
	sl := NewIdentityStreamLayer(mux.Listener(tlsconfig.ProtoRaft), nil, Identity{PeerID: tlsconfig.ConnPeerID,
		Dial: func(ctx context.Context, addr, id string) (net.Conn, error) {
			return n0.Dial(ctx, addr, tlsconfig.ProtoRaft, id)
		}})
	tr := newStreamTransport(Config{StreamLayer: sl, Logger: hclog.NewNullLogger()}).(*idTransport)
	t.Cleanup(func() { _ = tr.Close() })
	tr.setSource(fixedConfig{{ID: "n0", Address: raft.ServerAddress(ln.Addr().String())}, {ID: "n1", Address: raft.ServerAddress(taken)}})
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n0")}}
	var resp raft.AppendEntriesResponse
	err = tr.AppendEntries("n1", raft.ServerAddress(taken), req, &resp)
	if err == nil || !strings.Contains(err.Error(), `is "n9", not "n1"`) {
		t.Errorf("dialling n1's address held by n9 = %v", err)
	}
}
