package harness

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// groups renders node.group and node.subgroup when they are set.
func (c Config) groups() string {
	var s string
	if c.Group != "" {
		s += fmt.Sprintf("group = %q\n", c.Group)
	}
	if c.Subgroup != "" {
		s += fmt.Sprintf("subgroup = %q\n", c.Subgroup)
	}
	return s
}

// Signal sends sig to the process Start started (by its pid). A signal
// that ends a process (SIGTERM, SIGINT, SIGKILL) makes its exit expected,
// as Terminate and Kill do.
func (n *Node) Signal(sig os.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	if sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGKILL {
		n.expectExit = true
	}
	n.mu.Unlock()
	if cmd == nil {
		return errors.New("node was never started")
	}
	return cmd.Process.Signal(sig)
}

// ExpectExit says the current incarnation is about to end by itself (an
// admin set it TERMINATED): teardown does not report its exit.
func (n *Node) ExpectExit() {
	n.mu.Lock()
	n.expectExit = true
	n.mu.Unlock()
}

// WaitExit waits up to timeout for the process Start started to exit.
func (n *Node) WaitExit(timeout time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return errors.New("node was never started")
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %v", n.Args, timeout)
	}
}

// Stopped reports whether the process is stopped (SIGSTOP), from
// /proc/{pid}/stat on Linux: Signal returns before the kernel has stopped
// every thread.
func (n *Node) Stopped() bool {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}
