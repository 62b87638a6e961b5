package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/test/harness"
)

// fakeStore is a hand-written cluster.Store. Leader-only methods answer
// ErrNotLeader unless leading; the function fields override behaviour.
type fakeStore struct {
	mu       sync.Mutex
	leading  bool
	leaderID string
	// leaderAddr is the leader's raft address (node-to-node port).
	leaderAddr string
	state      *raftstore.State
	servers    []raft.Server
	applied    []raftstore.Command

	applyErr  error
	addServer func(id, addr string, voter bool) error

	// late, once armed, is the index this node applies at its second
	// look at the state after that: raft delivering an entry after the
	// leader answered.
	late      uint64
	lateArmed atomic.Bool
	lateLooks int

	commitsSent atomic.Int32
}

var _ cluster.Store = (*fakeStore)(nil)

func newFakeStore(leading bool, leaderID string) *fakeStore {
	return &fakeStore{leading: leading, leaderID: leaderID, state: raftstore.NewState()}
}

func (f *fakeStore) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leading
}

func (f *fakeStore) Leader() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderID, f.leaderAddr
}

// arm makes this store apply index at its second look at the state from
// now on.
func (f *fakeStore) arm(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.late = index
	f.lateArmed.Store(true)
}

func (f *fakeStore) State() *raftstore.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lateArmed.Load() {
		if f.lateLooks++; f.lateLooks == 2 {
			next := f.state.Clone()
			next.LastIndex = f.late
			f.state = next
		}
	}
	return f.state
}

// WaitForIndex looks at the state until it reaches index, as
// raftstore's does on each apply.
func (f *fakeStore) WaitForIndex(ctx context.Context, index uint64) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for f.State().LastIndex < index {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// SendCommit counts the leader's nudges of its followers.
func (f *fakeStore) SendCommit() { f.commitsSent.Add(1) }

func (f *fakeStore) Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error) {
	if t, ok := p.(*raftstore.UpsertNode); ok && t.Time.IsZero() {
		t.Time = time.Unix(1, 0)
	}
	cmd, err := raftstore.NewCommand(p)
	if err != nil {
		return raftstore.Result{}, err
	}
	return f.Apply(ctx, cmd)
}

func (f *fakeStore) Apply(_ context.Context, cmd raftstore.Command) (raftstore.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leading {
		return raftstore.Result{}, raftstore.ErrNotLeader
	}
	if f.applyErr != nil {
		return raftstore.Result{Index: 9}, f.applyErr
	}
	f.applied = append(f.applied, cmd)
	next := f.state.Clone()
	next.LastIndex++ // as the FSM counts commands
	err := (&raftstore.Applier{State: next}).Apply(cmd)
	f.state = next
	return raftstore.Result{Index: uint64(len(f.applied))}, err
}

func (f *fakeStore) AddVoter(id, addr string) error    { return f.add(id, addr, true) }
func (f *fakeStore) AddNonvoter(id, addr string) error { return f.add(id, addr, false) }

func (f *fakeStore) add(id, addr string, voter bool) error {
	if f.addServer != nil {
		if err := f.addServer(id, addr, voter); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	suffrage := raft.Nonvoter
	if voter {
		suffrage = raft.Voter
	}
	for i, s := range f.servers {
		if string(s.ID) == id {
			if s.Suffrage == raft.Nonvoter {
				f.servers[i].Suffrage = suffrage
			}
			return nil
		}
	}
	f.servers = append(f.servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: suffrage})
	return nil
}

func (f *fakeStore) RemoveServer(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.servers {
		if string(s.ID) == id {
			f.servers = append(f.servers[:i], f.servers[i+1:]...)
			break
		}
	}
	return nil
}

func (f *fakeStore) Servers() ([]raft.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]raft.Server(nil), f.servers...), nil
}

func (f *fakeStore) Stats() map[string]string {
	if f.IsLeader() {
		return map[string]string{"state": "Leader"}
	}
	return map[string]string{"state": "Follower"}
}

// triggerCount counts reconcile triggers.
type triggerCount struct {
	mu sync.Mutex
	n  int
}

func (c *triggerCount) Trigger() { c.mu.Lock(); c.n++; c.mu.Unlock() }

func (c *triggerCount) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// pair is a leader whose API runs on a real HTTP server and a follower
// that forwards to it.
type pair struct {
	leaderStore, followerStore *fakeStore
	leader, follower           *cluster.Cluster
	srv                        *httptest.Server
	triggers                   *triggerCount
}

func newPair(t *testing.T, leaderToken, followerToken string) *pair {
	t.Helper()
	p := &pair{leaderStore: newFakeStore(true, "L"), followerStore: newFakeStore(false, "L"), triggers: &triggerCount{}}
	var err error
	p.leader, err = cluster.New(cluster.Config{NodeID: "L", Store: p.leaderStore, Reconciler: p.triggers,
		DialTimeout: 200 * time.Millisecond, Logger: testlog.New(t).Named("L")})
	if err != nil {
		t.Fatal(err)
	}
	p.srv = httptest.NewServer(api.New(api.Config{Generations: noGenerations{}, Cluster: p.leader, Token: leaderToken,
		Logger: testlog.New(t)}))
	t.Cleanup(p.srv.Close)
	addr := strings.TrimPrefix(p.srv.URL, "http://")
	for _, s := range []*fakeStore{p.leaderStore, p.followerStore} {
		s.state.Nodes["L"] = raftstore.Node{ID: "L", HTTPAddr: addr, State: raftstore.NodeActive, Group: "default", Subgroup: "default"}
		s.state.Nodes["F"] = raftstore.Node{ID: "F", HTTPAddr: "127.0.0.1:1", State: raftstore.NodeActive, Group: "default", Subgroup: "default"}
	}
	p.leaderStore.servers = []raft.Server{{ID: "L", Address: "127.0.0.1:7000", Suffrage: raft.Voter}}
	p.follower, err = cluster.New(cluster.Config{NodeID: "F", Store: p.followerStore, Token: followerToken,
		ForwardTimeout: 500 * time.Millisecond, Logger: testlog.New(t).Named("F")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type noGenerations struct{}

func (noGenerations) Current() *api.Snapshot   { return nil }
func (noGenerations) Get(uint64) *api.Snapshot { return nil }

func TestForwardProposeAndReconcile(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	p.leaderStore.state.Generations[3] = raftstore.Generation{Number: 3, State: raftstore.GenerationStaged,
		ReadyNodes: map[string]time.Time{}, NodeErrors: map[string][]string{}}
	res, err := p.follower.Propose(ctx, &raftstore.ReportReady{Generation: 3, NodeID: "F"})
	if err != nil || res.Index != 1 {
		t.Fatalf("forwarded propose = %+v %v", res, err)
	}
	if ready := p.leaderStore.State().Generations[3].ReadyNodes["F"]; ready.IsZero() {
		t.Error("the follower's report did not reach the leader's state with its time")
	}
	// Leader-only commands are never accepted from outside.
	cmd, _ := raftstore.NewCommand(&raftstore.ActivateGeneration{Generation: 3, Time: time.Unix(5, 0)})
	if _, err := p.follower.ProposeCommand(ctx, cmd); !errors.Is(err, cluster.ErrNotForwardable) {
		t.Errorf("activate through the cluster API = %v", err)
	}
	// A rejection keeps its kind across the wire.
	_, err = p.follower.Propose(ctx, &raftstore.ReportReady{Generation: 99, NodeID: "F"})
	if !errors.Is(err, raftstore.ErrUnknownGeneration) || !errors.Is(err, raftstore.ErrRejected) {
		t.Errorf("rejected report = %v", err)
	}
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Code != 404 || re.Reason != "UNKNOWN_GENERATION" {
		t.Errorf("remote error = %+v", re)
	}
	if err := p.follower.Reconcile(ctx); err != nil || p.triggers.count() != 1 {
		t.Errorf("forwarded reconcile = %v, %d triggers", err, p.triggers.count())
	}
	if err := p.leader.Reconcile(ctx); err != nil || p.triggers.count() != 2 {
		t.Errorf("local reconcile = %v, %d triggers", err, p.triggers.count())
	}
}

func TestForwardJoinErrorsKeepTheirIdentity(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	raftLn := harness.RaftAnswerer(t)
	n, err := p.follower.Join(ctx, cluster.JoinRequest{ID: "N", RaftAddr: raftLn, HTTPAddr: "127.0.0.1:2", Voter: true})
	if err != nil || n.ID != "N" || !n.Voter || n.Group != "default" {
		t.Fatalf("join = %+v %v", n, err)
	}
	p.leaderStore.addServer = func(id, addr string, voter bool) error {
		return fmt.Errorf("%w: node %s is a member elsewhere", raftstore.ErrMembership, id)
	}
	_, err = p.follower.Join(ctx, cluster.JoinRequest{ID: "M", RaftAddr: raftLn, HTTPAddr: "127.0.0.1:2"})
	var re *cluster.RemoteError
	if !errors.Is(err, raftstore.ErrMembership) || !errors.As(err, &re) || re.Code != 409 || re.Status != "ALREADY_EXISTS" ||
		!cluster.Permanent(err) {
		t.Errorf("membership conflict = %v (%+v)", err, re)
	}
	p.leaderStore.addServer = nil
	_, err = p.follower.Join(ctx, cluster.JoinRequest{ID: "X", RaftAddr: deadAddr(t), HTTPAddr: "127.0.0.1:2"})
	if !errors.Is(err, cluster.ErrRaftUnreachable) || !cluster.Permanent(err) {
		t.Errorf("unreachable raft address = %v", err)
	}
	if _, err := p.follower.Join(ctx, cluster.JoinRequest{ID: "Y", RaftAddr: "nope", HTTPAddr: "h:1"}); !errors.Is(err, cluster.ErrBadRequest) {
		t.Errorf("bad address = %v", err)
	}
	// Moving an ACTIVE node to another group is refused before raft is touched.
	_, err = p.follower.Join(ctx, cluster.JoinRequest{ID: "N", RaftAddr: raftLn, HTTPAddr: "127.0.0.1:2", Group: "edge"})
	if !errors.Is(err, raftstore.ErrNodeState) || !errors.As(err, &re) || re.Status != "FAILED_PRECONDITION" {
		t.Errorf("group change = %v", err)
	}
	if got := len(p.leaderStore.servers); got != 2 {
		t.Errorf("refused joins changed the configuration: %d servers", got)
	}
}

func TestForwardRetriesThenGivesUp(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	// The node the follower believes leads is not leading any more.
	p.leaderStore.mu.Lock()
	p.leaderStore.leading = false
	p.leaderStore.mu.Unlock()
	start := time.Now()
	err := p.follower.Reconcile(ctx)
	if !errors.Is(err, raftstore.ErrNotLeader) || time.Since(start) < 400*time.Millisecond {
		t.Errorf("not leader = %v after %v", err, time.Since(start))
	}
	// The leader's address does not answer.
	p.followerStore.state.Nodes["L"] = raftstore.Node{ID: "L", HTTPAddr: deadAddr(t)}
	if err := p.follower.Reconcile(ctx); !errors.Is(err, cluster.ErrForward) || cluster.Permanent(err) {
		t.Errorf("unreachable leader = %v", err)
	}
	// No leader known and nothing to ask.
	p.followerStore.leaderID = ""
	if err := p.follower.Reconcile(ctx); !errors.Is(err, cluster.ErrNoLeader) || !errors.Is(err, raftstore.ErrNotLeader) {
		t.Errorf("no leader = %v", err)
	}
	// A forwarded request is never forwarded again.
	if err := p.follower.Reconcile(cluster.WithForwarded(ctx)); !errors.Is(err, raftstore.ErrNotLeader) {
		t.Errorf("forwarded twice = %v", err)
	}
}

func TestForwardToken(t *testing.T) {
	ctx := context.Background()
	if err := newPair(t, "s3cret", "s3cret").follower.Reconcile(ctx); err != nil {
		t.Errorf("with the token: %v", err)
	}
	err := newPair(t, "s3cret", "").follower.Reconcile(ctx)
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Code != 401 || re.Status != "UNAUTHENTICATED" || !cluster.Permanent(err) {
		t.Errorf("without the token: %v", err)
	}
}

func TestHeartbeatsAndRequired(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	p.leader.ResetLeadership()
	st := p.leaderStore.State()
	st.Nodes["G"] = raftstore.Node{ID: "G", State: raftstore.NodeActive}
	st.Nodes["T"] = raftstore.Node{ID: "T", State: raftstore.NodeTerminated}
	// Just after gaining leadership every registered node is required.
	if got := p.leader.Required(st); strings.Join(got, ",") != "F,G,L" {
		t.Errorf("required before settling = %v", got)
	}
	v, err := p.follower.Heartbeat(ctx, cluster.Heartbeat{ID: "F", Generation: 4})
	if err != nil || v.Leader != "L" || v.Nodes["F"].Generation != 4 || !v.Nodes["F"].Reachable {
		t.Fatalf("heartbeat = %+v %v", v, err)
	}
	if _, err := p.follower.Heartbeat(ctx, cluster.Heartbeat{ID: "stranger"}); !errors.Is(err, raftstore.ErrUnknownNode) {
		t.Errorf("heartbeat of an unknown node = %v", err)
	}
	// Once settled, only the leader and the nodes heard from recently.
	time.Sleep(cluster.ReachableIntervals*cluster.DefaultHeartbeatInterval + 50*time.Millisecond)
	if _, err := p.follower.Heartbeat(ctx, cluster.Heartbeat{ID: "F", Generation: 4}); err != nil {
		t.Fatal(err)
	}
	if got := p.leader.Required(st); strings.Join(got, ",") != "F,L" {
		t.Errorf("required after settling = %v", got)
	}
	// A node that has just joined is required before its first heartbeat.
	st.Nodes["J"] = raftstore.Node{ID: "J", State: raftstore.NodeActive, UpdateTime: time.Now()}
	if got := p.leader.Required(st); strings.Join(got, ",") != "F,J,L" {
		t.Errorf("required right after a join = %v", got)
	}
	// The follower keeps the view it got with its heartbeat.
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.follower.RunHeartbeats(hctx, func() uint64 { return 5 }) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.follower.View().Nodes["F"].Generation != 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if v := p.follower.View(); v.Leader != "L" || v.Nodes["F"].Generation != 5 {
		t.Errorf("follower's view = %+v", v)
	}
}

func TestLeaveRules(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	if err := p.follower.Leave(ctx, cluster.LeaveRequest{ID: "L"}); !errors.Is(err, cluster.ErrLastVoter) {
		t.Errorf("leave of the only voter = %v", err)
	}
	if err := p.follower.Leave(ctx, cluster.LeaveRequest{ID: "nobody"}); !errors.Is(err, raftstore.ErrUnknownNode) {
		t.Errorf("leave of a stranger = %v", err)
	}
	if err := p.follower.Leave(ctx, cluster.LeaveRequest{ID: "F"}); err != nil {
		t.Errorf("leave = %v", err)
	}
	if _, ok := p.leaderStore.State().Nodes["F"]; ok {
		t.Error("F still registered")
	}
}

func TestRegisterStopsOnRefusal(t *testing.T) {
	p := newPair(t, "", "")
	p.leaderStore.addServer = func(id, addr string, voter bool) error {
		return fmt.Errorf("%w: taken", raftstore.ErrMembership)
	}
	ln := harness.RaftAnswerer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.follower.Register(ctx, cluster.JoinRequest{ID: "F", RaftAddr: ln, HTTPAddr: "127.0.0.1:9"})
	if !errors.Is(err, raftstore.ErrMembership) || !strings.Contains(err.Error(), "join refused") {
		t.Errorf("register = %v", err)
	}
}

// TestJoinOfSilentVoterRefused is the attack of issue 15: a voter whose
// raft address accepts connections but never answers. Added, it would
// count towards the quorum and could leave the cluster without a leader;
// the leader must refuse it before touching the configuration.
func TestJoinOfSilentVoterRefused(t *testing.T) {
	p := newPair(t, "", "")
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	_, err = p.leader.Join(context.Background(), cluster.JoinRequest{ID: "S", RaftAddr: silent.Addr().String(),
		HTTPAddr: "127.0.0.1:2", Voter: true})
	if !errors.Is(err, cluster.ErrRaftUnreachable) {
		t.Errorf("join of a silent voter = %v", err)
	}
	if got := len(p.leaderStore.servers); got != 1 {
		t.Errorf("the silent voter entered the configuration: %d servers", got)
	}
}

func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestReportErrorsAreBounded is issue 15's spoof of forty 900 KB failure
// reports: a node's own report is cut to the cap before it is proposed,
// and a larger one offered through the propose endpoint is refused.
func TestReportErrorsAreBounded(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	p.leaderStore.state.Generations[3] = raftstore.Generation{Number: 3, State: raftstore.GenerationStaged,
		ReadyNodes: map[string]time.Time{}, NodeErrors: map[string][]string{}}
	many := make([]string, 2000)
	for i := range many {
		many[i] = fmt.Sprintf("web/policy.toml:%d: %s", i, strings.Repeat("x", 100))
	}
	if _, err := p.follower.Propose(ctx, &raftstore.ReportFailed{Generation: 3, NodeID: "F", Errors: many}); err != nil {
		t.Fatal(err)
	}
	got := p.leaderStore.State().Generations[3].NodeErrors["F"]
	total := 0
	for _, e := range got {
		total += len(e)
	}
	if total > 16<<10 || len(got) < 2 || !strings.Contains(got[len(got)-1], "more errors not reported") {
		t.Errorf("recorded %d errors of %d bytes; last %q", len(got), total, got[len(got)-1])
	}
	huge, err := raftstore.NewCommand(&raftstore.ReportFailed{Generation: 3, NodeID: "F",
		Errors: []string{strings.Repeat("y", 900<<10)}, Time: time.Unix(9, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.follower.ProposeCommand(ctx, huge); !errors.Is(err, cluster.ErrBadRequest) {
		t.Errorf("a 900 KB report = %v", err)
	}
}

// TestForwardCarriesTheCallersCredential: a user request a follower
// forwards reaches the leader with the caller's own Authorization header,
// not the follower's token, and the leader checks it.
func TestForwardCarriesTheCallersCredential(t *testing.T) {
	p := newPair(t, "tok", "tok")
	ctx := context.Background()
	err := p.follower.Reconcile(cluster.WithCredential(ctx, "Bearer stolen"))
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Code != 401 {
		t.Errorf("forwarded with a wrong caller credential = %v", err)
	}
	if err := p.follower.Reconcile(cluster.WithCredential(ctx, "Bearer tok")); err != nil {
		t.Errorf("forwarded with the caller's valid credential = %v", err)
	}
	if err := p.follower.Reconcile(ctx); err != nil {
		t.Errorf("the node's own request with its token = %v", err)
	}
}

// TestPeerIdentityDecides: with mutual TLS, the verified peer is who a
// request comes from. A node moves its own HTTP address; another node
// cannot move it, join or remove it in its name, or heartbeat for it.
func TestPeerIdentityDecides(t *testing.T) {
	store := newFakeStore(true, "L")
	store.servers = []raft.Server{{ID: "L", Address: "127.0.0.1:7000", Suffrage: raft.Voter},
		{ID: "A", Address: "127.0.0.1:7001", Suffrage: raft.Voter}}
	store.state.Nodes["A"] = raftstore.Node{ID: "A", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001",
		State: raftstore.NodeActive, Group: "default", Subgroup: "default"}
	c, err := cluster.New(cluster.Config{NodeID: "L", Store: store, PeerTLS: true, Logger: testlog.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	move := func(ctx context.Context, to string) error {
		_, err := c.Join(ctx, cluster.JoinRequest{ID: "A", RaftAddr: "127.0.0.1:7001", HTTPAddr: to, Voter: true})
		return err
	}
	if err := move(cluster.WithPeer(ctx, "B"), "127.0.0.1:6666"); !errors.Is(err, cluster.ErrNotPeer) {
		t.Errorf("B moving A = %v", err)
	}
	if err := move(ctx, "127.0.0.1:6666"); !errors.Is(err, cluster.ErrNotPeer) {
		t.Errorf("an unauthenticated caller moving A = %v", err)
	}
	if err := move(cluster.WithPeer(ctx, "A"), "127.0.0.1:8002"); err != nil {
		t.Errorf("A moving itself = %v", err)
	}
	if got := store.State().Nodes["A"].HTTPAddr; got != "127.0.0.1:8002" {
		t.Errorf("A is at %s", got)
	}
	_, err = c.Join(cluster.WithPeer(ctx, "B"), cluster.JoinRequest{ID: "C", RaftAddr: "127.0.0.1:7003",
		HTTPAddr: "127.0.0.1:8003", Voter: true})
	if !errors.Is(err, cluster.ErrNotPeer) {
		t.Errorf("B joining C = %v", err)
	}
	if err := c.Leave(cluster.WithPeer(ctx, "B"), cluster.LeaveRequest{ID: "A"}); !errors.Is(err, cluster.ErrNotPeer) {
		t.Errorf("B removing A = %v", err)
	}
	if _, ok := store.State().Nodes["A"]; !ok {
		t.Error("A was removed")
	}
	_, err = c.Heartbeat(cluster.WithPeer(ctx, "B"), cluster.Heartbeat{ID: "A"})
	if !errors.Is(err, cluster.ErrNotPeer) {
		t.Errorf("B heartbeating for A = %v", err)
	}
}
