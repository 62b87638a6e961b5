package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// Node is one `reconciler serve` process.
type Node struct {
	ID, HTTPAddr, RaftAddr string
	Dir                    string   // the node's directory: config.toml, data/
	Log                    string   // file receiving the process's stdout and stderr
	Args                   []string // arguments of the binary
	Env                    []string // environment of the process

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Base is the node's HTTP base URL.
func (n *Node) Base() string { return "http://" + n.HTTPAddr }

// Start runs bin with n.Args, appending its output to n.Log; the kernel
// kills the process if the test process dies. Kill ends it.
func (n *Node) Start(bin string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, n.Args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, n.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); f.Close(); close(done) }(n.done)
	return nil
}

// Kill ends the process Start started (by its pid) and waits for it; it
// does nothing if the node was never started.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Running reports whether the process Start started has not exited yet
// (false before Start and after Kill).
func (n *Node) Running() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Warnings are the node's log lines at warn or error level.
func (n *Node) Warnings() []string {
	data, _ := os.ReadFile(n.Log)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, `"@level":"warn"`) || strings.Contains(l, `"@level":"error"`) {
			out = append(out, l)
		}
	}
	return out
}

// Tail is the last lines of the node's log.
func (n *Node) Tail(lines int) string {
	data, _ := os.ReadFile(n.Log)
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// Config is a node's config.toml.
type Config struct {
	ID, DataDir, HTTPAddr, RaftAddr string
	Bootstrap                       bool
	Join                            []string // raft addresses to join

	GitURL   string
	Poll     string // git.poll
	Timeout  string // git.timeout; omitted if empty
	TokenEnv string // git.token_env; omitted if empty

	APITokenEnv string // api.token_env

	Group, Subgroup string // node.group, node.subgroup; omitted if empty

	// Extra is TOML appended verbatim, e.g. a [preview] section.
	Extra string
}

// TOML renders the config, logging at info level in JSON.
func (c Config) TOML() string {
	var join []string
	for _, j := range c.Join {
		join = append(join, fmt.Sprintf("%q", j))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `[node]
id = %q
data_dir = %q
http_addr = %q
raft_addr = %q
bootstrap = %t
join = [%s]
%s
[git]
url = %q
init_from = ""
poll = %q
`, c.ID, c.DataDir, c.HTTPAddr, c.RaftAddr, c.Bootstrap, strings.Join(join, ", "), c.groups(), c.GitURL, c.Poll)
	if c.Timeout != "" {
		fmt.Fprintf(&b, "timeout = %q\n", c.Timeout)
	}
	if c.TokenEnv != "" {
		fmt.Fprintf(&b, "token_env = %q\n", c.TokenEnv)
	}
	fmt.Fprintf(&b, `
[api]
token_env = %q

[log]
level = "info"
format = "json"
`, c.APITokenEnv)
	if c.Extra != "" {
		b.WriteString("\n" + c.Extra + "\n")
	}
	return b.String()
}
