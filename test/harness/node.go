package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Node is one `reconciler serve` process. Its addresses, config and data
// directory stay the same across restarts, as a StatefulSet pod's would,
// so Kill and Start again is a crash and a restart of the same member.
type Node struct {
	ID, HTTPAddr, RaftAddr string
	Dir                    string   // the node's directory: config.toml, data/
	DataDir                string   // node.data_dir, inside Dir
	Config                 string   // path of its config.toml
	Log                    string   // stdout and stderr of every incarnation, appended
	Args                   []string // arguments of the binary
	Env                    []string // environment of the process

	// healthy tells load generators whether failures are expected: false
	// while the node is paused, killed or starting; epoch changes on
	// every transition, so an answer that straddles one is recognised.
	healthy atomic.Bool
	epoch   atomic.Int64
	paused  atomic.Bool // between Pause and Resume (or the end of the incarnation)

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{} // closed when the current incarnation exited
	exitErr     error
	expectExit  bool     // set before the harness signals the process to end
	unexpected  []string // exits nobody asked for
	incarnation int
}

// Base is the node's HTTP base URL.
func (n *Node) Base() string { return "http://" + n.HTTPAddr }

// Healthy reports whether the node should answer every request now (it
// was ready and has not been paused, killed or restarted since), and the
// epoch that answer belongs to.
func (n *Node) Healthy() (bool, int64) { return n.healthy.Load(), n.epoch.Load() }

func (n *Node) setHealthy(ok bool) {
	n.healthy.Store(ok)
	n.epoch.Add(1)
}

// Start runs a new incarnation of the node with bin, appending its output
// to n.Log. The kernel kills the process if the test process dies (a test
// timeout panics without running t.Cleanup), so nodes never outlive the
// test; its own process group keeps a terminal's ^C away from it.
func (n *Node) Start(bin string) error { return n.start(bin, false) }

// StartRefused runs a new incarnation that must end by itself (a node
// that refuses to start); its exit is not reported as unexpected.
func (n *Node) StartRefused(bin string) error { return n.start(bin, true) }

func (n *Node) start(bin string, expectExit bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !closed(n.done) {
		return fmt.Errorf("%s: already running (pid %d)", n.ID, n.cmd.Process.Pid)
	}
	f, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.incarnation++
	fmt.Fprintf(f, "=== harness: start %s incarnation %d at %s: %s\n",
		n.ID, n.incarnation, time.Now().Format(time.RFC3339Nano), strings.Join(n.Args, " "))
	cmd := exec.Command(bin, n.Args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, n.Env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: start: %w", n.ID, err)
	}
	n.cmd, n.done, n.exitErr, n.expectExit = cmd, make(chan struct{}), nil, expectExit
	n.setHealthy(false)
	n.paused.Store(false)
	go n.wait(cmd, n.done, f, n.incarnation)
	return nil
}

// wait reaps one incarnation and records whether anyone asked it to end.
func (n *Node) wait(cmd *exec.Cmd, done chan struct{}, f *os.File, inc int) {
	err := cmd.Wait()
	fmt.Fprintf(f, "=== harness: %s incarnation %d exited at %s: %s\n",
		n.ID, inc, time.Now().Format(time.RFC3339Nano), exitString(err))
	f.Close()
	n.mu.Lock()
	n.exitErr = err
	if !n.expectExit {
		n.unexpected = append(n.unexpected, fmt.Sprintf("incarnation %d exited on its own: %s", inc, exitString(err)))
	}
	n.mu.Unlock()
	n.setHealthy(false)
	close(done)
}

// Running reports whether the current incarnation has not exited yet
// (false before Start and after Kill). A paused node is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !closed(n.done)
}

// Pid is the process id of the current incarnation, 0 when none runs.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || closed(n.done) {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill ends the current incarnation with SIGKILL and waits until it is
// gone; it does nothing if the node is not running. SIGKILL cannot be
// caught, so the wait is bounded by the kernel, not by the node.
func (n *Node) Kill() { _ = n.end(syscall.SIGKILL, 0) }

// Terminate sends SIGTERM (a graceful stop) and waits up to timeout; a
// node still running then is killed and the error says so.
func (n *Node) Terminate(timeout time.Duration) error {
	err := n.end(syscall.SIGTERM, timeout)
	if err != nil {
		n.Kill()
	}
	return err
}

// end signals the process to end and waits for it, up to timeout when
// timeout > 0.
func (n *Node) end(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	if n.cmd == nil || closed(n.done) {
		n.mu.Unlock()
		return nil
	}
	n.expectExit = true
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	n.setHealthy(false)
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: signal %v: %w", n.ID, sig, err)
	}
	if sig != syscall.SIGKILL {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused node must see SIGTERM
	}
	if timeout <= 0 {
		<-done
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s: still running %v after %v", n.ID, timeout, sig)
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing, like a node in a long GC pause or a frozen VM.
func (n *Node) Pause() error {
	n.setHealthy(false)
	err := n.signal(syscall.SIGSTOP)
	if err == nil {
		n.paused.Store(true)
	}
	return err
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error {
	err := n.signal(syscall.SIGCONT)
	if err == nil {
		n.paused.Store(false)
		n.setHealthy(true)
	}
	return err
}

// Paused reports whether Pause stopped the running incarnation and Resume
// has not continued it yet.
func (n *Node) Paused() bool { return n.paused.Load() && n.Running() }

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || closed(n.done) {
		return fmt.Errorf("%s: not running", n.ID)
	}
	return n.cmd.Process.Signal(sig)
}

// ExitErr is how the last incarnation ended (nil: exit status 0, or still
// running).
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitErr
}

// Unexpected returns the exits of this node that the harness did not ask
// for (neither Kill nor Terminate).
func (n *Node) Unexpected() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.unexpected...)
}

// Warnings are the node's log lines at warn or error level.
func (n *Node) Warnings() []string {
	return n.LogLines(`"@level":"warn"`, `"@level":"error"`)
}

// LogLines returns the lines of the node's log that contain any of
// needles.
func (n *Node) LogLines(needles ...string) []string {
	f, err := os.Open(n.Log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		for _, s := range needles {
			if bytes.Contains(sc.Bytes(), []byte(s)) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}

// Tail is the last lines of the node's log.
func (n *Node) Tail(lines int) string {
	data, err := os.ReadFile(n.Log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
