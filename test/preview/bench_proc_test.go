package preview_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pinning says where the benchmark runs. With taskset and two CPUs or
// more, the node gets CPU 0 and this process (the load generator) CPU 1,
// each with GOMAXPROCS=1, so the generator's own work never queues behind
// the node's and the node's latency is not the scheduler's mood;
// otherwise both share every CPU.
type pinning struct {
	on   bool
	mode string
}

// Taskset CPU lists of the two sides.
const (
	nodeCPU = "0"
	loadCPU = "1"
)

// pinLoadGenerator pins this process to loadCPU when it can; t's cleanup
// restores the affinity and GOMAXPROCS it found.
func pinLoadGenerator(t *testing.T, allowed bool) *pinning {
	t.Helper()
	shared := "shared: node and load generator on all %d CPUs, default GOMAXPROCS (%s)"
	why := ""
	switch _, err := exec.LookPath("taskset"); {
	case !allowed:
		why = envBenchPin + "=0"
	case runtime.NumCPU() < 2:
		why = "fewer than 2 CPUs"
	case err != nil:
		why = "no taskset"
	}
	if why != "" {
		return &pinning{mode: fmt.Sprintf(shared, runtime.NumCPU(), why)}
	}
	self := os.Getpid()
	orig, err := cpusAllowed(self)
	if err == nil {
		err = taskset(self, loadCPU)
	}
	if err != nil {
		return &pinning{mode: fmt.Sprintf(shared, runtime.NumCPU(), "taskset failed: "+err.Error())}
	}
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(prev)
		if err := taskset(self, orig); err != nil {
			t.Logf("restoring this process's CPU affinity: %v", err)
		}
	})
	return &pinning{on: true, mode: fmt.Sprintf("pinned: node on CPU %s (GOMAXPROCS=1), load generator on CPU %s (GOMAXPROCS=1)",
		nodeCPU, loadCPU)}
}

// env is the node's extra environment.
func (p *pinning) env() []string {
	if p.on {
		return []string{"GOMAXPROCS=1"}
	}
	return nil
}

// pinNode pins every thread of the node process (later threads inherit
// it) to nodeCPU when pinning is on.
func (p *pinning) pinNode(t *testing.T, pid int) {
	t.Helper()
	if !p.on {
		return
	}
	if err := taskset(pid, nodeCPU); err != nil {
		t.Fatalf("pinning the node: %v (set %s=0 to run unpinned)", err, envBenchPin)
	}
	if got, err := cpusAllowed(pid); err != nil || got != nodeCPU {
		t.Fatalf("node process %d allowed CPUs %q after taskset, want %s: %v", pid, got, nodeCPU, err)
	}
}

// taskset sets the CPU list of every thread of pid.
func taskset(pid int, cpus string) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, err, bytes.TrimSpace(out))
	}
	return nil
}

// cpusAllowed is the Cpus_allowed_list of pid's main thread.
func cpusAllowed(pid int) (string, error) {
	return procStatus(pid, "Cpus_allowed_list")
}

// procStatus is one field of /proc/pid/status.
func procStatus(pid int, field string) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// rssKiB is pid's resident set size in KiB (0 when unknown).
func rssKiB(pid int) int {
	v, err := procStatus(pid, "VmRSS")
	if err != nil {
		return 0
	}
	kib, _ := strconv.Atoi(strings.TrimSuffix(v, " kB"))
	return kib
}

// clockTick is the unit of utime and stime in /proc/pid/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime is the user and system CPU time pid has used so far, to clock
// ticks (0 when unknown).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
}
