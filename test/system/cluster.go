package system

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// Deadlines of the harness's waits; every wait is bounded by one.
const (
	StartTimeout   = 30 * time.Second
	LeaderTimeout  = 20 * time.Second
	PromoteTimeout = 30 * time.Second
)

// Cluster is N reconciler processes on loopback sharing one PolicyRepo.
// Every process is killed in t.Cleanup; when the test failed, the tail of
// each node's log is printed.
type Cluster struct {
	t     testing.TB
	Root  string
	Bin   string
	Repo  *PolicyRepo
	Nodes []*Process
	// CertDir, when set, holds the cluster CA and every node's
	// certificate: the nodes run with [tls] (NewTLSCluster).
	CertDir string

	seen sync.Map // generation number → the last Generation read of it
}

// NewCluster prepares n nodes (n1 bootstraps, the others join it) without
// starting them.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, n, false)
}

// NewTLSCluster is NewCluster with mutual TLS between the nodes: a
// cluster CA and node certificates made by `reconciler certs`, as
// docs/cluster.md shows, and node.join naming raft addresses.
func NewTLSCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, n, true)
}

// StartTLSCluster is StartCluster over NewTLSCluster.
func StartTLSCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(NewTLSCluster(t, n))
}

func newCluster(t testing.TB, n int, withTLS bool) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Root: t.TempDir(), Bin: Binary(t)}
	if withTLS {
		c.CertDir = filepath.Join(c.Root, "certs")
	}
	c.Repo = NewPolicyRepo(t, c.Root)
	addrs := harness.FreeAddrs(t, 2*n)
	for i := range n {
		p := &Process{ID: fmt.Sprintf("n%d", i+1), HTTPAddr: addrs[2*i], RaftAddr: addrs[2*i+1]}
		dir := nodeDir(c.Root, p.ID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.DataDir, p.Config, p.LogPath = filepath.Join(dir, "data"), filepath.Join(dir, "config.toml"), filepath.Join(dir, "node.log")
		c.Nodes = append(c.Nodes, p)
	}
	if withTLS {
		c.makeCerts(t)
	}
	for i, p := range c.Nodes {
		c.configure(t, p, i == 0)
	}
	t.Cleanup(c.teardown)
	return c
}

// StartCluster starts n nodes and waits until they serve tree 0 together.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(NewCluster(t, n))
}

func start(c *Cluster) *Cluster {
	c.t.Helper()
	c.Start(c.Nodes[0])
	c.WaitReady(c.Nodes[0], StartTimeout)
	for _, p := range c.Nodes[1:] {
		c.Start(p)
	}
	for _, p := range c.Nodes[1:] {
		c.WaitReady(p, StartTimeout)
	}
	c.WaitServing(0, c.Nodes, StartTimeout)
	c.WaitReachable(c.Nodes, StartTimeout)
	return c
}

// WaitReachable waits until the leader lists every node in nodes as
// reachable, so that it waits for their Ready on the next promotion.
func (c *Cluster) WaitReachable(nodes []*Process, timeout time.Duration) {
	c.t.Helper()
	err := harness.Eventually(timeout, func() error {
		leader, err := agreedLeader(nodes)
		if err != nil {
			return err
		}
		s, err := GetStatus(leader.HTTPAddr)
		if err != nil {
			return err
		}
		for _, p := range nodes {
			if !slices.ContainsFunc(s.Nodes, func(n NodeStatus) bool { return n.ID == p.ID && n.Reachable }) {
				return fmt.Errorf("leader %s does not list %s as reachable: %+v", leader.ID, p.ID, s.Nodes)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("nodes %s not all reachable after %v: %v", ids(nodes), timeout, err)
	}
}

// configure writes p's config.toml and command line: the same ones on
// every start, as a StatefulSet would.
func (c *Cluster) configure(t testing.TB, p *Process, bootstrap bool) {
	var join []string
	if !bootstrap {
		for _, q := range c.Nodes {
			if q != p && c.CertDir != "" {
				join = append(join, q.RaftAddr) // the node-to-node port
			} else if q != p {
				join = append(join, q.HTTPAddr)
			}
		}
	}
	cfg := fmt.Sprintf(`[node]
id = %q
data_dir = %q
http_addr = %q
raft_addr = %q
bootstrap = %t
join = [%s]

[git]
url = %q
init_from = %q
poll = "@every 1s"

[log]
level = "info"
`, p.ID, p.DataDir, p.HTTPAddr, p.RaftAddr, bootstrap, quoteList(join), c.Repo.Bare, c.Repo.Dir)
	if c.CertDir != "" {
		cfg += fmt.Sprintf("\n[tls]\nca_file = %q\ncert_file = %q\nkey_file = %q\n",
			filepath.Join(c.CertDir, "ca.pem"), filepath.Join(c.CertDir, p.ID+".pem"), filepath.Join(c.CertDir, p.ID+"-key.pem"))
	}
	if err := os.WriteFile(p.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Args = []string{"serve", "--config", p.Config, "--node-id", p.ID, "--http-addr", p.HTTPAddr,
		"--raft-addr", p.RaftAddr, "--data-dir", p.DataDir}
	if bootstrap {
		p.Args = append(p.Args, "--bootstrap")
	} else {
		p.Args = append(p.Args, "--join", strings.Join(join, ","))
	}
}

// Start starts p (without waiting for it).
func (c *Cluster) Start(p *Process) {
	c.t.Helper()
	if err := p.Start(c.Bin); err != nil {
		c.t.Fatal(err)
	}
}

// WaitReady waits until p answers /readyz with 200, then counts it healthy.
func (c *Cluster) WaitReady(p *Process, timeout time.Duration) {
	c.t.Helper()
	err := harness.Eventually(timeout, func() error {
		if !p.Running() {
			return errors.New("the process exited")
		}
		return Ready(p.HTTPAddr)
	})
	if err != nil {
		c.t.Fatalf("%s not ready after %v: %v", p.ID, timeout, err)
	}
	p.setHealthy(true)
}

// Restart starts a stopped node again on its data directory and waits
// until it is ready.
func (c *Cluster) Restart(p *Process) {
	c.t.Helper()
	c.Start(p)
	c.WaitReady(p, StartTimeout)
}

// Kill kills p with SIGKILL.
func (c *Cluster) Kill(p *Process) {
	c.t.Helper()
	if err := p.Kill(); err != nil {
		c.t.Fatal(err)
	}
}

// Pause sends SIGSTOP to p; Resume sends SIGCONT.
func (c *Cluster) Pause(p *Process) {
	c.t.Helper()
	if err := p.Pause(); err != nil {
		c.t.Fatal(err)
	}
}

// Resume sends SIGCONT to p.
func (c *Cluster) Resume(p *Process) {
	c.t.Helper()
	if err := p.Resume(); err != nil {
		c.t.Fatal(err)
	}
}

// Others returns the nodes other than the given ones.
func (c *Cluster) Others(not ...*Process) []*Process {
	var out []*Process
	for _, p := range c.Nodes {
		if !contains(not, p) {
			out = append(out, p)
		}
	}
	return out
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Process {
	for _, p := range c.Nodes {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// Leader waits until every node in among reports the same leader, which
// is one of them and says it is the leader, and returns it.
func (c *Cluster) Leader(timeout time.Duration, among ...*Process) *Process {
	c.t.Helper()
	if len(among) == 0 {
		among = c.Nodes
	}
	var leader *Process
	err := harness.Eventually(timeout, func() error {
		var err error
		leader, err = agreedLeader(among)
		return err
	})
	if err != nil {
		c.t.Fatalf("no leader among %s after %v: %v", ids(among), timeout, err)
	}
	return leader
}

func agreedLeader(among []*Process) (*Process, error) {
	var id string
	for _, p := range among {
		s, err := GetStatus(p.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.ID, err)
		}
		if s.Leader == "" || (id != "" && s.Leader != id) {
			return nil, fmt.Errorf("%s says the leader is %q (others: %q)", p.ID, s.Leader, id)
		}
		id = s.Leader
		if s.NodeID == id && s.RaftState != "Leader" {
			return nil, fmt.Errorf("%s is named leader but is %s", p.ID, s.RaftState)
		}
	}
	for _, p := range among {
		if p.ID == id {
			return p, nil
		}
	}
	return nil, fmt.Errorf("leader %q is not among %s", id, ids(among))
}

// Promote writes tree k and asks a node (the first healthy one of via, or
// of the cluster) to reconcile now.
func (c *Cluster) Promote(k int, via ...*Process) {
	c.t.Helper()
	c.Repo.Write(c.t, k)
	c.Trigger(via...)
}

// Trigger asks a healthy node to reconcile now, retrying for 10 s (no
// leader during an election). Not getting 202 by then is a test error,
// though the poll (every second) would still pick the change up.
func (c *Cluster) Trigger(via ...*Process) {
	c.t.Helper()
	if len(via) == 0 {
		via = c.Nodes
	}
	// Retried for a while: without a leader (an election) it may fail.
	err := harness.Eventually(10*time.Second, func() error {
		for _, p := range via {
			if ok, _ := p.Healthy(); ok {
				return Reconcile(p.HTTPAddr)
			}
		}
		return errors.New("no healthy node to ask")
	})
	if err != nil {
		c.t.Errorf("POST /v1/cluster:reconcile: %v (relying on the poll)", err)
	}
}

// WaitServing waits until every node in nodes answers the probe from
// tree k at one and the same generation, and returns that generation.
func (c *Cluster) WaitServing(k int, nodes []*Process, timeout time.Duration) uint64 {
	c.t.Helper()
	var gen uint64
	err := harness.Eventually(timeout, func() error {
		var err error
		gen, err = servingTree(k, nodes)
		return err
	})
	if err != nil {
		c.t.Fatalf("tree %d not served by %s after %v: %v", k, ids(nodes), timeout, err)
	}
	return gen
}

func servingTree(k int, nodes []*Process) (uint64, error) {
	var gen uint64
	for _, p := range nodes {
		ctx, cancel := shortCtx()
		d, err := Evaluate(ctx, p.HTTPAddr, Policy, ProbeRequest)
		cancel()
		switch {
		case err != nil:
			return 0, fmt.Errorf("%s: %w", p.ID, err)
		case d.Rule != ProbeRule(k):
			return 0, fmt.Errorf("%s answers with rule %q at generation %d", p.ID, d.Rule, d.Generation)
		case gen != 0 && uint64(d.Generation) != gen:
			return 0, fmt.Errorf("%s serves tree %d at generation %d, another node at %d", p.ID, k, d.Generation, gen)
		}
		gen = uint64(d.Generation)
	}
	return gen, nil
}

// WaitConverged waits until every node in nodes reports the same active
// generation (at least min) and the same policy etags in /v1/status, and
// returns one of the statuses.
func (c *Cluster) WaitConverged(nodes []*Process, min uint64, timeout time.Duration) *Status {
	c.t.Helper()
	var st *Status
	err := harness.Eventually(timeout, func() error {
		var err error
		st, err = converged(nodes, min)
		return err
	})
	if err != nil {
		c.t.Fatalf("%s did not converge after %v: %v", ids(nodes), timeout, err)
	}
	return st
}

func converged(nodes []*Process, min uint64) (*Status, error) {
	var first *Status
	for _, p := range nodes {
		s, err := GetStatus(p.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.ID, err)
		}
		if s.ServedGeneration != 0 && s.ServedGeneration != s.ActiveGeneration {
			return nil, fmt.Errorf("%s: serves generation %d, active is %d", p.ID, s.ServedGeneration, s.ActiveGeneration)
		}
		if uint64(s.ActiveGeneration) < min || len(s.Policies) == 0 {
			return nil, fmt.Errorf("%s: active generation %d (want >= %d), %d policies", p.ID, s.ActiveGeneration, min, len(s.Policies))
		}
		if first == nil {
			first = s
			continue
		}
		if s.ActiveGeneration != first.ActiveGeneration || !maps.Equal(s.Etags(), first.Etags()) {
			return nil, fmt.Errorf("%s: generation %d etags %v; %s: generation %d etags %v",
				p.ID, s.ActiveGeneration, s.Etags(), first.NodeID, first.ActiveGeneration, first.Etags())
		}
	}
	return first, nil
}

// teardown kills every node, then reports nodes that exited on their own
// or logged a panic or a data race, and prints the logs of a failed test.
func (c *Cluster) teardown() {
	for _, p := range c.Nodes {
		if err := p.Kill(); err != nil {
			c.t.Errorf("teardown: %v", err)
		}
	}
	for _, p := range c.Nodes {
		for _, u := range p.Unexpected() {
			c.t.Errorf("%s: %s", p.ID, u)
		}
		for _, l := range p.LogLines("panic:", "fatal error:", "WARNING: DATA RACE") {
			c.t.Errorf("%s logged: %s", p.ID, l)
		}
	}
	if c.t.Failed() || os.Getenv(EnvLogs) != "" {
		for _, p := range c.Nodes {
			c.t.Logf("---- tail of %s's log (%s) ----\n%s", p.ID, p.LogPath, p.LogTail(logTail()))
		}
	}
}

// logTail is how many lines of each node's log teardown prints:
// RECONCILER_SYSTEM_LOGS=N (any N > 0), else 60.
func logTail() int {
	if n, err := strconv.Atoi(os.Getenv(EnvLogs)); err == nil && n > 0 {
		return n
	}
	return 60
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func ids(ps []*Process) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.ID
	}
	return "[" + strings.Join(s, " ") + "]"
}

func contains(ps []*Process, p *Process) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
