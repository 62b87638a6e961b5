//go:build !linux

package harness

import "syscall"

// sysProcAttr puts a node in its own process group; only Linux can also
// tie its life to the test process (see sysproc_linux.go).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
