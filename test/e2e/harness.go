package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment variables of the package.
const (
	EnvBench = "RECONCILER_E2E_BENCH"
	EnvLogs  = "RECONCILER_E2E_LOGS"
	// tokenEnv is the variable the nodes' [git] token_env names.
	tokenEnv = "E2E_GIT_TOKEN"
)

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// binary builds ./cmd/reconciler once per test run.
func binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "reconciler-e2e-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "reconciler")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", build.path, "./cmd/reconciler")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

func moduleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "../.."
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// childEnv is the environment of every process the tests start: no git
// configuration of the developer's, and the git token.
func childEnv(token string) []string {
	return append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		tokenEnv+"="+token)
}

// node is one `reconciler serve` process.
type node struct {
	ID, HTTPAddr, RaftAddr, Dir string
	args                        []string
	log                         string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (n *node) base() string { return "http://" + n.HTTPAddr }

// start runs the node; the kernel kills it if the test process dies.
func (n *node) start(bin, token string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, n.args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, childEnv(token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); f.Close(); close(done) }(n.done)
	return nil
}

// kill ends the process this test started (by its pid) and waits for it.
func (n *node) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// warnings are the node's log lines at warn or error level.
func (n *node) warnings() []string {
	data, _ := os.ReadFile(n.log)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, `"@level":"warn"`) || strings.Contains(l, `"@level":"error"`) {
			out = append(out, l)
		}
	}
	return out
}

func (n *node) tail(lines int) string {
	data, _ := os.ReadFile(n.log)
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// clusterOptions shape a cluster's config.
type clusterOptions struct {
	URL, Token string
	Poll       string // git.poll
	Timeout    string // git.timeout
	APIToken   string // set: [api] token_env names E2E_API_TOKEN
}

// cluster is three nodes following one repository.
type cluster struct {
	t     testing.TB
	bin   string
	opts  clusterOptions
	nodes []*node
}

// startCluster starts n1 (bootstrap), then n2 and n3 joining it, and waits
// until all three serve a first generation.
func startCluster(t testing.TB, opts clusterOptions) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: binary(t), opts: opts}
	addrs := freeAddrs(t, 6)
	root := t.TempDir()
	for i := range 3 {
		n := &node{ID: fmt.Sprintf("n%d", i+1), HTTPAddr: addrs[2*i], RaftAddr: addrs[2*i+1],
			Dir: filepath.Join(root, fmt.Sprintf("n%d", i+1))}
		n.log = filepath.Join(root, n.ID+".log")
		c.configure(n, i == 0, addrs[0])
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(c.teardown)
	for i, n := range c.nodes {
		if err := n.start(c.bin, opts.Token); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			c.waitReady(n)
		}
	}
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	return c
}

func (c *cluster) configure(n *node, bootstrap bool, first string) {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	join := ""
	if !bootstrap {
		join = fmt.Sprintf("%q", first)
	}
	apiToken := `""`
	if c.opts.APIToken != "" {
		apiToken = `"E2E_API_TOKEN"`
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
init_from = ""
poll = %q
timeout = %q
token_env = %q

[api]
token_env = %s

[log]
level = "info"
format = "json"
`, n.ID, filepath.Join(n.Dir, "data"), n.HTTPAddr, n.RaftAddr, bootstrap, join, c.opts.URL, c.opts.Poll,
		c.opts.Timeout, tokenEnv, apiToken)
	path := filepath.Join(n.Dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		c.t.Fatal(err)
	}
	n.args = []string{"serve", "--config", path}
}

func (c *cluster) waitReady(n *node) {
	c.t.Helper()
	err := eventually(60*time.Second, func() error {
		code, _, err := get(n.base() + "/readyz")
		if err == nil && code != 200 {
			err = fmt.Errorf("readyz %d", code)
		}
		return err
	})
	if err != nil {
		c.t.Fatalf("%s not ready: %v\n%s", n.ID, err, n.tail(40))
	}
}

// teardown kills every node, and prints their logs when the test failed.
func (c *cluster) teardown() {
	for _, n := range c.nodes {
		n.kill()
	}
	if c.t.Failed() || os.Getenv(EnvLogs) != "" {
		for _, n := range c.nodes {
			c.t.Logf("---- tail of %s ----\n%s", n.ID, n.tail(60))
		}
	}
	for _, n := range c.nodes {
		data, _ := os.ReadFile(n.log)
		for _, bad := range []string{"panic:", "fatal error:", "WARNING: DATA RACE"} {
			if bytes.Contains(data, []byte(bad)) {
				c.t.Errorf("%s logged %q", n.ID, bad)
			}
		}
	}
}

// leader is the node all nodes agree leads.
func (c *cluster) leader() *node {
	c.t.Helper()
	var leader *node
	err := eventually(30*time.Second, func() error {
		var id string
		for _, n := range c.nodes {
			s, err := status(n)
			if err != nil {
				return err
			}
			if s.Leader == "" || (id != "" && s.Leader != id) {
				return fmt.Errorf("%s says the leader is %q", n.ID, s.Leader)
			}
			id = s.Leader
		}
		for _, n := range c.nodes {
			if n.ID == id {
				leader = n
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return leader
}

// waitServing waits until every node answers the probe with rule want and
// returns the generation they serve it from.
func (c *cluster) waitServing(want string, timeout time.Duration) uint64 {
	c.t.Helper()
	var gen uint64
	err := eventually(timeout, func() error {
		var err error
		gen, err = c.serving(want)
		return err
	})
	if err != nil {
		c.t.Fatalf("%s not served everywhere after %v: %v", want, timeout, err)
	}
	return gen
}

// serving checks once that every node answers the probe with rule want
// from one generation.
func (c *cluster) serving(want string) (uint64, error) {
	var gen uint64
	for _, n := range c.nodes {
		d, err := probe(n)
		switch {
		case err != nil:
			return 0, err
		case d.Rule != want:
			return 0, fmt.Errorf("%s answers %q from generation %d", n.ID, d.Rule, d.Generation)
		case gen != 0 && d.Generation != gen:
			return 0, fmt.Errorf("%s serves %s from generation %d, another node from %d", n.ID, want, d.Generation, gen)
		}
		gen = d.Generation
	}
	return gen, nil
}

// trigger asks any node to reconcile now (followers forward).
func (c *cluster) trigger(n *node) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, n.base()+"/v1/cluster:reconcile", strings.NewReader("{}"))
	if c.opts.APIToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIToken)
	}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("reconcile via %s: %v", n.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		body, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("reconcile via %s: %d %s", n.ID, resp.StatusCode, body)
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(url string) (int, []byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func getJSON(url string, v any) error {
	code, body, err := get(url)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s: %d %s", url, code, body)
	}
	return json.Unmarshal(body, v)
}

// statusAnswer is the part of GET /v1/status the tests read.
type statusAnswer struct {
	NodeID           string `json:"nodeId"`
	Leader           string `json:"leader"`
	ActiveGeneration uint64 `json:"activeGeneration"`
	Source           struct {
		Commit, Error string
	} `json:"source"`
	Policies []struct {
		Name       string `json:"name"`
		Conditions []struct {
			Type, Message string
			Generation    uint64
		} `json:"conditions"`
	} `json:"policies"`
	Experiments []map[string]any `json:"experiments"`
}

func status(n *node) (*statusAnswer, error) {
	var s statusAnswer
	return &s, getJSON(n.base()+"/v1/status", &s)
}

// pullError returns the PullError message n shows on the policy web.
func (s *statusAnswer) pullError() string {
	for _, p := range s.Policies {
		for _, c := range p.Conditions {
			if p.Name == "policies/web" && c.Type == "PullError" {
				return c.Message
			}
		}
	}
	return ""
}

// generationAnswer is a generation resource.
type generationAnswer struct {
	Generation   uint64   `json:"generation"`
	Commit       string   `json:"commit"`
	State        string   `json:"state"`
	ActivateTime string   `json:"activateTime"`
	ReadyNodes   []string `json:"readyNodes"`
	Errors       []string `json:"errors"`
}

func generations(n *node) (map[string][]generationAnswer, error) {
	var list struct{ Generations []generationAnswer }
	if err := getJSON(n.base()+"/v1/generations", &list); err != nil {
		return nil, err
	}
	byCommit := map[string][]generationAnswer{}
	for _, g := range list.Generations {
		byCommit[g.Commit] = append(byCommit[g.Commit], g)
	}
	return byCommit, nil
}

// decision is an :evaluate answer.
type decision struct {
	Decision   string `json:"decision"`
	Rule       string `json:"rule"`
	Generation uint64 `json:"generation"`
}

// probe asks n for the decision of the probe request.
func probe(n *node) (decision, error) {
	var d decision
	resp, err := client.Post(n.base()+"/v1/policies/web:evaluate", "application/json",
		strings.NewReader(`{"method":"GET","path":"/probe"}`))
	if err != nil {
		return d, fmt.Errorf("%s: %w", n.ID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return d, fmt.Errorf("%s: %d %s", n.ID, resp.StatusCode, body)
	}
	return d, json.Unmarshal(body, &d)
}

// metric reads one unlabelled series from n's /metrics.
func metric(n *node, name string) (float64, error) {
	_, body, err := get(n.base() + "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, fmt.Errorf("%s: no series %s", n.ID, name)
}

// eventually calls f every 20 ms until it returns nil or timeout passed.
func eventually(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddrs returns n distinct free 127.0.0.1 addresses.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}
