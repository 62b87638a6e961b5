package system

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Process is one `reconciler serve` node: its addresses and data directory
// stay the same across restarts, as a StatefulSet pod's would.
type Process struct {
	ID       string
	HTTPAddr string
	RaftAddr string
	DataDir  string
	Config   string // path of its config.toml
	LogPath  string // stdout and stderr of every incarnation, appended
	Args     []string

	// health tells load generators whether failures are expected:
	// healthy is false while the node is paused, killed or starting, and
	// epoch changes on every transition.
	healthy atomic.Bool
	epoch   atomic.Int64

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{} // closed when the current incarnation exited
	exitErr     error
	expectExit  bool     // set before we signal the process to end
	unexpected  []string // exits nobody asked for
	incarnation int
}

// Healthy reports whether the node should answer every decision now, and
// the epoch that answer belongs to.
func (p *Process) Healthy() (bool, int64) { return p.healthy.Load(), p.epoch.Load() }

func (p *Process) setHealthy(ok bool) {
	p.healthy.Store(ok)
	p.epoch.Add(1)
}

// Start runs a new incarnation of the node. binary is the reconciler path.
func (p *Process) Start(binary string) error { return p.start(binary, false) }

// StartRefused runs a new incarnation that must end by itself (a node
// that refuses to start); its exit is not reported as unexpected.
func (p *Process) StartRefused(binary string) error { return p.start(binary, true) }

func (p *Process) start(binary string, expectExit bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return fmt.Errorf("%s: already running (pid %d)", p.ID, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.incarnation++
	fmt.Fprintf(logf, "=== system test: start %s incarnation %d at %s: %s\n",
		p.ID, p.incarnation, time.Now().Format(time.RFC3339Nano), strings.Join(p.Args, " "))
	cmd := exec.Command(binary, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv()
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: start: %w", p.ID, err)
	}
	p.cmd, p.done, p.exitErr, p.expectExit = cmd, make(chan struct{}), nil, expectExit
	go p.wait(cmd, p.done, logf, p.incarnation)
	return nil
}

func (p *Process) wait(cmd *exec.Cmd, done chan struct{}, logf *os.File, inc int) {
	err := cmd.Wait()
	fmt.Fprintf(logf, "=== system test: %s incarnation %d exited at %s: %v\n",
		p.ID, inc, time.Now().Format(time.RFC3339Nano), errOrZero(err))
	logf.Close()
	p.mu.Lock()
	p.exitErr = err
	if !p.expectExit {
		p.unexpected = append(p.unexpected, fmt.Sprintf("incarnation %d exited on its own: %v", inc, errOrZero(err)))
	}
	p.mu.Unlock()
	p.setHealthy(false)
	close(done)
}

// Running reports whether the current incarnation is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !closed(p.done)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() error { return p.end(syscall.SIGKILL, 10*time.Second) }

// Terminate sends SIGTERM (a graceful stop) and waits up to timeout; a
// node still running then is killed and the error says so.
func (p *Process) Terminate(timeout time.Duration) error {
	err := p.end(syscall.SIGTERM, timeout)
	if err != nil {
		if kerr := p.Kill(); kerr != nil {
			return errors.Join(err, kerr)
		}
	}
	return err
}

func (p *Process) end(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	if p.cmd == nil || closed(p.done) {
		p.mu.Unlock()
		return nil
	}
	p.expectExit = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	p.setHealthy(false)
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: signal %v: %w", p.ID, sig, err)
	}
	if sig != syscall.SIGKILL {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused node must see SIGTERM
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s: still running %v after %v", p.ID, timeout, sig)
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing, like a node in a long GC pause or a frozen VM.
func (p *Process) Pause() error {
	p.setHealthy(false)
	return p.signal(syscall.SIGSTOP)
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error {
	err := p.signal(syscall.SIGCONT)
	if err == nil {
		p.setHealthy(true)
	}
	return err
}

func (p *Process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || closed(p.done) {
		return fmt.Errorf("%s: not running", p.ID)
	}
	return p.cmd.Process.Signal(sig)
}

// ExitErr is how the last incarnation ended (nil: exit status 0).
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Unexpected returns the exits of this node that no test asked for.
func (p *Process) Unexpected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unexpected...)
}

// LogTail returns the last n lines of the node's log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogLines returns the lines of the node's log that contain any of needles.
func (p *Process) LogLines(needles ...string) []string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		for _, n := range needles {
			if bytes.Contains(sc.Bytes(), []byte(n)) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}

// childEnv is the test's environment without the secrets a config may
// name, so mutating endpoints need no token, and with git hermetic.
func childEnv() []string {
	drop := map[string]bool{"RECONCILER_TOKEN": true, "GITHUB_TOKEN": true, "GITHUB_WEBHOOK_SECRET": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func errOrZero(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// nodeDir is where a node's files live inside the cluster directory.
func nodeDir(root, id string) string { return filepath.Join(root, id) }
