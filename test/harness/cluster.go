package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Environment variables the harness gives nodes when it configures them.
const (
	// GitTokenEnv holds the git server's token (ClusterOptions.Repo).
	GitTokenEnv = "HARNESS_GIT_TOKEN"
	// APITokenEnv holds the API token (ClusterOptions.APIToken).
	APITokenEnv = "HARNESS_API_TOKEN"
)

// ClusterOptions shape a cluster.
type ClusterOptions struct {
	Size int      // number of nodes; n1 bootstraps, the others join it
	Env  []string // extra "NAME=value" entries of every process's environment

	// Repo, if set, is followed by every node: git.url, its token and a
	// one-second poll are set before Configure runs.
	Repo *Repo
	// GitHub, if set, is the GitHub emulator every node's [github] table
	// names (with its token and webhook secret in the environment).
	GitHub *GitHub
	// Extra is TOML appended to every node's config (Config.Extra),
	// after the [github] table, before Configure runs.
	Extra string
	// APIToken, if set, is required by the nodes for mutations ([api]
	// token_env) and sent by Cluster.Client.
	APIToken string

	// Configure, if set, completes each node's config (git URL, poll,
	// extra sections...); ID, addresses, data dir, bootstrap and join are
	// already filled in.
	Configure func(*Config)

	// Race runs RaceBinary instead of Binary when the tests themselves
	// run with -race, so that the nodes' races fail the test as they
	// would in process.
	Race bool
	// Bin, if set, is the binary to run instead.
	Bin string

	// JoinRaft: a joining node names the others' raft addresses instead
	// of their HTTP addresses (the node-to-node port, as with [tls]).
	JoinRaft bool

	// AllowExits: a node that exits on its own (neither Kill nor
	// Terminate) does not fail the test.
	AllowExits bool

	TailLines  int  // log lines per node printed at teardown when the test failed (default 40)
	AlwaysLogs bool // print them even when the test passed
}

// Cluster is the nodes of one test, their policy repository when the
// harness made one, and a client to talk to them.
type Cluster struct {
	T      testing.TB
	Bin    string
	Root   string // the directory holding every node's directory
	Nodes  []*Node
	Repo   *Repo   // ClusterOptions.Repo
	Client *Client // sends ClusterOptions.APIToken
	opts   ClusterOptions
}

// NewCluster writes the configs of opts.Size nodes under t.TempDir()
// without starting any. Every process is killed in t.Cleanup, which then
// fails t if a log shows a panic, a fatal error or a data race, or if a
// node exited on its own (unless AllowExits).
func NewCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.TailLines == 0 {
		opts.TailLines = 40
	}
	c := &Cluster{T: t, Bin: opts.Bin, Root: t.TempDir(), Repo: opts.Repo, opts: opts}
	if c.Bin == "" {
		c.Bin = clusterBinary(t, opts.Race)
	}
	c.Client = NewClient(10*time.Second, 64)
	c.Client.Token = opts.APIToken
	addrs := FreeAddrs(t, 2*opts.Size)
	for i := range opts.Size {
		id := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(c.Root, id)
		c.Nodes = append(c.Nodes, &Node{ID: id, HTTPAddr: addrs[2*i], RaftAddr: addrs[2*i+1], Dir: dir,
			DataDir: filepath.Join(dir, "data"), Config: filepath.Join(dir, "config.toml"),
			Log: filepath.Join(c.Root, id+".log"), Env: ChildEnv(c.env()...)})
	}
	for i, n := range c.Nodes {
		c.configure(n, i == 0)
	}
	t.Cleanup(c.teardown)
	return c
}

// StartCluster is NewCluster, then StartAll.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c := NewCluster(t, opts)
	c.StartAll()
	return c
}

// StartAll starts n1 and waits until it is ready, then starts the others
// and waits until all are ready.
func (c *Cluster) StartAll() {
	c.T.Helper()
	for i, n := range c.Nodes {
		c.Start(n)
		if i == 0 {
			c.WaitReady(n)
		}
	}
	for _, n := range c.Nodes[1:] {
		c.WaitReady(n)
	}
}

// env is what the options add to every node's environment.
func (c *Cluster) env() []string {
	env := slices.Clone(c.opts.Env)
	if c.opts.Repo != nil && c.opts.Repo.token != "" {
		env = append(env, GitTokenEnv+"="+c.opts.Repo.token)
	}
	if c.opts.APIToken != "" {
		env = append(env, APITokenEnv+"="+c.opts.APIToken)
	}
	if c.opts.GitHub != nil {
		env = append(env, c.opts.GitHub.Env()...)
	}
	return env
}

// configure writes n's config.toml and command line: the same ones on
// every start, as a StatefulSet would. A joining node names every other
// node, so it can restart while any one of them is down.
func (c *Cluster) configure(n *Node, bootstrap bool) {
	c.T.Helper()
	cfg := Config{ID: n.ID, DataDir: n.DataDir, HTTPAddr: n.HTTPAddr, RaftAddr: n.RaftAddr, Bootstrap: bootstrap,
		Extra: c.opts.Extra}
	if c.opts.GitHub != nil {
		cfg.Extra = c.opts.GitHub.TOML() + "\n" + cfg.Extra
	}
	if !bootstrap {
		for _, o := range c.Nodes {
			switch {
			case o == n:
			case c.opts.JoinRaft:
				cfg.Join = append(cfg.Join, o.RaftAddr)
			default:
				cfg.Join = append(cfg.Join, o.HTTPAddr)
			}
		}
	}
	if r := c.opts.Repo; r != nil {
		cfg.GitURL, cfg.Poll = r.URL, "@every 1s"
		if r.token != "" {
			cfg.TokenEnv = GitTokenEnv
		}
	}
	if c.opts.APIToken != "" {
		cfg.APITokenEnv = APITokenEnv
	}
	if c.opts.Configure != nil {
		c.opts.Configure(&cfg)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		c.T.Fatal(err)
	}
	if err := os.WriteFile(n.Config, []byte(cfg.TOML()), 0o644); err != nil {
		c.T.Fatal(err)
	}
	n.Args = []string{"serve", "--config", n.Config}
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

// Start starts n (without waiting for it); a failure fails the test.
func (c *Cluster) Start(n *Node) {
	c.T.Helper()
	if err := n.Start(c.Bin); err != nil {
		c.T.Fatal(err)
	}
}

// WaitReady waits up to ReadyTimeout for n's /readyz to answer 200, then
// counts n healthy; it fails the test with n's log tail if n exits or is
// not ready in time.
func (c *Cluster) WaitReady(n *Node) {
	c.T.Helper()
	err := Eventually(ReadyTimeout, func() error {
		if !n.Running() {
			return Final(fmt.Errorf("the process exited: %s", exitString(n.ExitErr())))
		}
		return c.Client.Ready(n)
	})
	if err != nil {
		var final finalError
		if !errors.As(err, &final) {
			err = fmt.Errorf("not ready after %v: %w", ReadyTimeout, err)
		}
		c.T.Fatalf("%s: %v\n%s", n.ID, err, n.Tail(c.opts.TailLines))
	}
	n.setHealthy(true)
}

// Restart starts a stopped node again on its data directory and waits
// until it is ready.
func (c *Cluster) Restart(n *Node) {
	c.T.Helper()
	c.Start(n)
	c.WaitReady(n)
}

// Kill kills n with SIGKILL and waits until it is gone.
func (c *Cluster) Kill(n *Node) { n.Kill() }

// Pause sends SIGSTOP to n; a failure fails the test.
func (c *Cluster) Pause(n *Node) {
	c.T.Helper()
	if err := n.Pause(); err != nil {
		c.T.Fatal(err)
	}
}

// Resume sends SIGCONT to n; a failure fails the test.
func (c *Cluster) Resume(n *Node) {
	c.T.Helper()
	if err := n.Resume(); err != nil {
		c.T.Fatal(err)
	}
}

// Others returns the nodes other than the given ones.
func (c *Cluster) Others(not ...*Node) []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if !slices.Contains(not, n) {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Running returns the nodes whose process runs (paused ones included).
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// Answering returns the nodes that run and are not paused: the ones that
// can answer.
func (c *Cluster) Answering() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	return out
}

// teardown kills every node, prints their log tails when the test failed
// (or always with AlwaysLogs), and reports panics, fatal errors, data
// races and exits nobody asked for.
func (c *Cluster) teardown() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	if c.T.Failed() || c.opts.AlwaysLogs {
		for _, n := range c.Nodes {
			c.T.Logf("---- tail of %s (%s) ----\n%s", n.ID, n.Log, n.Tail(c.opts.TailLines))
		}
	}
	for _, n := range c.Nodes {
		for _, l := range n.LogLines("panic:", "fatal error:", "DATA RACE") {
			c.T.Errorf("%s logged: %s", n.ID, l)
		}
		if !c.opts.AllowExits {
			for _, u := range n.Unexpected() {
				c.T.Errorf("%s: %s", n.ID, u)
			}
		}
	}
}

// IDs lists the ids of nodes, for messages.
func IDs(nodes []*Node) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.ID
	}
	return "[" + strings.Join(s, " ") + "]"
}
