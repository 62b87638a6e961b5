// Package harness runs `reconciler serve` processes for the end-to-end
// tests (test/e2e, test/preview): it builds the binary once, picks free
// ports, writes node configs, starts clusters whose processes are killed in
// t.Cleanup, waits with a bound for readiness, and talks HTTP to nodes.
//
// It is imported only by tests. test/system has its own, richer harness.
package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BuildTimeout bounds `go build` of the binary.
const BuildTimeout = 5 * time.Minute

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary builds ./cmd/reconciler once per test process and returns its
// path; it fails t if the build failed.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "reconciler-harness-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "reconciler")
		ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", build.path, "./cmd/reconciler")
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// RemoveBinary deletes what Binary built; call it from TestMain after
// m.Run.
func RemoveBinary() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}

// ModuleRoot is the directory of the module's go.mod (../.. if `go env`
// fails, which is right from test/<pkg>).
func ModuleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "../.."
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// ChildEnv is the environment of a process the tests start: the test's
// own, without the developer's git configuration or prompts, plus extra
// ("NAME=value") entries.
func ChildEnv(extra ...string) []string {
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	return append(env, extra...)
}

// FreeAddrs returns n distinct free 127.0.0.1 addresses.
func FreeAddrs(t testing.TB, n int) []string {
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

// Eventually calls f every 20 ms until it returns nil or timeout passed,
// and returns f's last error.
func Eventually(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
