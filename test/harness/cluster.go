package harness

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ReadyTimeout bounds the wait for a node's /readyz.
const ReadyTimeout = 60 * time.Second

// ClusterOptions shape a cluster.
type ClusterOptions struct {
	Size int      // number of nodes; n1 bootstraps, the others join it
	Env  []string // extra "NAME=value" entries of every process's environment

	// Configure, if set, completes each node's config (git URL, poll,
	// extra sections...); ID, addresses, data dir, bootstrap and join are
	// already filled in.
	Configure func(*Config)

	// Race runs RaceBinary instead of Binary when the tests themselves
	// run with -race, so that the nodes' races fail the test as they
	// would in process.
	Race bool

	// APIToken is a token the nodes accept (in the variable [api]
	// token_env names), sent with the harness's own status reads.
	APIToken string

	TailLines  int  // log lines per node printed at teardown when the test failed (default 40)
	AlwaysLogs bool // print them even when the test passed
}

// Cluster is nodes started by StartCluster.
type Cluster struct {
	T     testing.TB
	Bin   string
	Nodes []*Node
	opts  ClusterOptions
}

// StartCluster writes the configs of opts.Size nodes under t.TempDir(),
// starts n1 and waits until it is ready, then starts the others and waits
// until all are ready. Every process is killed in t.Cleanup, which then
// fails t if a log shows a panic, a fatal error or a data race.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.TailLines == 0 {
		opts.TailLines = 40
	}
	c := &Cluster{T: t, Bin: clusterBinary(t, opts.Race), opts: opts}
	addrs := FreeAddrs(t, 2*opts.Size)
	root := t.TempDir()
	for i := range opts.Size {
		id := fmt.Sprintf("n%d", i+1)
		n := &Node{ID: id, HTTPAddr: addrs[2*i], RaftAddr: addrs[2*i+1], Dir: filepath.Join(root, id),
			Log: filepath.Join(root, id+".log"), Env: ChildEnv(opts.Env...)}
		cfg := Config{ID: id, DataDir: filepath.Join(n.Dir, "data"), HTTPAddr: n.HTTPAddr, RaftAddr: n.RaftAddr,
			Bootstrap: i == 0}
		if i > 0 {
			cfg.Join = []string{addrs[0]}
		}
		if opts.Configure != nil {
			opts.Configure(&cfg)
		}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(n.Dir, "config.toml")
		if err := os.WriteFile(path, []byte(cfg.TOML()), 0o644); err != nil {
			t.Fatal(err)
		}
		n.Args = []string{"serve", "--config", path}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(c.teardown)
	for i, n := range c.Nodes {
		if err := n.Start(c.Bin); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			c.WaitReady(n)
		}
	}
	for _, n := range c.Nodes {
		c.WaitReady(n)
	}
	return c
}

// clusterBinary is RaceBinary when race is set and the tests run with
// -race, else Binary.
func clusterBinary(t testing.TB, race bool) string {
	t.Helper()
	if race && raceEnabled {
		return RaceBinary(t)
	}
	return Binary(t)
}

// WaitReady waits up to ReadyTimeout for n's /readyz to answer 200, and
// fails the test with n's log tail if it does not.
func (c *Cluster) WaitReady(n *Node) {
	c.T.Helper()
	cl := NewClient(10*time.Second, 0)
	err := Eventually(ReadyTimeout, func() error {
		code, body, err := cl.Do(http.MethodGet, n.Base()+"/readyz", "")
		if err == nil && code != 200 {
			err = fmt.Errorf("readyz %d %s", code, body)
		}
		return err
	})
	if err != nil {
		c.T.Fatalf("%s not ready: %v\n%s", n.ID, err, n.Tail(40))
	}
}

// teardown kills every node, prints their log tails when the test failed
// (or always with AlwaysLogs), and checks the logs.
func (c *Cluster) teardown() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	if c.T.Failed() || c.opts.AlwaysLogs {
		for _, n := range c.Nodes {
			c.T.Logf("---- tail of %s ----\n%s", n.ID, n.Tail(c.opts.TailLines))
		}
	}
	for _, n := range c.Nodes {
		data, _ := os.ReadFile(n.Log)
		for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
			if bytes.Contains(data, []byte(bad)) {
				c.T.Errorf("%s logged %q", n.ID, bad)
			}
		}
	}
}
