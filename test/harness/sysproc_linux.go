package harness

import "syscall"

// sysProcAttr makes the kernel kill a node when the test process dies
// (a test timeout panics without running t.Cleanup): nodes never outlive
// the test. Its own process group keeps a terminal's ^C from reaching it
// before the test's cleanup does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
