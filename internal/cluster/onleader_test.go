package cluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// OnLeader runs locally on the leader, forwards once from a follower and
// hands back the leader's answer, never forwards a forwarded request, and
// waits a bounded time for a leader to be known.
func TestOnLeader(t *testing.T) {
	p := newPair(t, "s3cret", "s3cret")
	ctx := context.Background()
	reconcile := cluster.Call{Method: http.MethodPost, Path: cluster.PathReconcile, Body: []byte("{}")}
	calls := 0
	notLeader := func(context.Context) error { calls++; return raftstore.ErrNotLeader }

	a, err := p.leader.OnLeader(ctx, 0, func(context.Context) error { calls++; return nil }, reconcile)
	if a != nil || err != nil || calls != 1 || p.triggers.count() != 0 {
		t.Fatalf("on the leader: %+v %v, %d local calls, %d triggers", a, err, calls, p.triggers.count())
	}
	a, err = p.follower.OnLeader(ctx, 0, notLeader, reconcile)
	if err != nil || a == nil || a.Status != http.StatusAccepted || a.Err() != nil || p.triggers.count() != 1 {
		t.Fatalf("forwarded: %+v %v, %d triggers", a, err, p.triggers.count())
	}
	// A forwarded request is answered here, never forwarded again.
	calls = 0
	if a, err = p.follower.OnLeader(cluster.WithForwarded(ctx), time.Second, notLeader, reconcile); a != nil ||
		!errors.Is(err, raftstore.ErrNotLeader) || calls != 1 || p.triggers.count() != 1 {
		t.Fatalf("forwarded twice: %+v %v, %d local calls", a, err, calls)
	}
	// The leader's error answer keeps its kind.
	a, err = p.follower.OnLeader(ctx, 0, notLeader, cluster.Call{Method: http.MethodPost, Path: "/v1/cluster:nothing"})
	var re *cluster.RemoteError
	if err != nil || a == nil || !errors.As(a.Err(), &re) || re.Code != http.StatusNotFound {
		t.Fatalf("error answer: %+v %v", a, err)
	}
	// A caller's call carries the caller's credential, never the node's:
	// without one the leader refuses it, with the right one it runs.
	asCaller := reconcile
	asCaller.Caller = true
	a, err = p.follower.OnLeader(ctx, 0, notLeader, asCaller)
	if err != nil || a == nil || !errors.As(a.Err(), &re) || re.Code != http.StatusUnauthorized {
		t.Fatalf("a caller without a credential: %+v %v", a, err)
	}
	asCaller.Authorization = "Bearer s3cret"
	if a, err = p.follower.OnLeader(ctx, 0, notLeader, asCaller); err != nil || a == nil || a.Err() != nil {
		t.Fatalf("a caller with the credential: %+v %v", a, err)
	}
	// No leader known: local is tried again until the wait ends.
	p.followerStore.leaderID = ""
	calls = 0
	if _, err = p.follower.OnLeader(ctx, 250*time.Millisecond, notLeader, reconcile); !errors.Is(err, raftstore.ErrNotLeader) || calls < 2 {
		t.Fatalf("no leader: %v after %d local calls", err, calls)
	}
	// An unreachable leader is ErrForward.
	p.followerStore.leaderID = "L"
	p.followerStore.state.Nodes["L"] = raftstore.Node{ID: "L", HTTPAddr: deadAddr(t)}
	if _, err = p.follower.OnLeader(ctx, 0, notLeader, reconcile); !errors.Is(err, cluster.ErrForward) {
		t.Fatalf("unreachable leader: %v", err)
	}
}

// TestOnLeaderTrustsOnlyTheLeadersIndex: with node-to-node TLS, the
// applied index the forwarding node waits for counts only when the
// server that answered proves with its certificate that it is the leader
// raft names; another node's certificate at that address (or a server
// whose certificate names no node) cannot make it wait.
func TestOnLeaderTrustsOnlyTheLeadersIndex(t *testing.T) {
	dir := t.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	mat := map[string]*tlsconfig.Material{}
	for _, id := range []string{"F", "L", "X"} {
		f, err := tlsconfig.CreateNode(dir, id, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if mat[id], err = tlsconfig.Load(f); err != nil {
			t.Fatal(err)
		}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13,
		RootCAs: mat["F"].Roots, Certificates: []tls.Certificate{mat["F"].Cert}}}}
	call := cluster.Call{Method: http.MethodPost, Path: "/v1/generations:rollback", Body: []byte("{}"), Caller: true}
	notLeader := func(context.Context) error { return raftstore.ErrNotLeader }
	for server, want := range map[string]uint64{"L": 99, "X": 0} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(cluster.AppliedIndexHeader, "99")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}\n"))
		}))
		srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{mat[server].Cert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		store := newFakeStore(false, "L")
		store.state.LastIndex = 99 // nothing to wait for: the index is the question here
		store.leaderAddr = strings.TrimPrefix(srv.URL, "https://")
		c, err := cluster.New(cluster.Config{NodeID: "F", Store: store, PeerTLS: true, Client: client, Logger: testlog.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.OnLeader(context.Background(), 0, notLeader, call)
		if err != nil || a == nil || a.Status != http.StatusOK {
			t.Fatalf("answered by %s: %+v %v", server, a, err)
		}
		if a.From != server || a.AppliedIndex != want {
			t.Errorf("answered by %s: from %q, index %d, want %d", server, a.From, a.AppliedIndex, want)
		}
	}
}
