// Package harness runs `reconciler serve` processes for the end-to-end
// tests (test/e2e, test/preview, test/github): it builds the binary once,
// picks free ports, writes node configs, starts clusters whose processes
// are killed in t.Cleanup, waits with a bound for readiness and for a
// leader, and talks HTTP to nodes.
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

// binaryBuild is one build of the binary, done once per test process.
type binaryBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// build is Binary's; raceBuild is RaceBinary's.
var build, raceBuild binaryBuild

// Binary builds ./cmd/reconciler once per test process and returns its
// path; it fails t if the build failed.
func Binary(t testing.TB) string {
	t.Helper()
	return build.get(t)
}

// RaceBinary is Binary built with -race: its processes write "WARNING:
// DATA RACE" to their logs, which the cluster's teardown looks for.
func RaceBinary(t testing.TB) string {
	t.Helper()
	return raceBuild.get(t, "-race")
}

// get builds the binary with flags the first time and returns its path;
// it fails t if the build failed.
func (b *binaryBuild) get(t testing.TB, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "reconciler-harness-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "reconciler")
		ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
		defer cancel()
		args := append(append([]string{"build"}, flags...), "-o", b.path, "./cmd/reconciler")
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// RemoveBinary deletes what Binary and RaceBinary built; call it from
// TestMain after m.Run.
func RemoveBinary() {
	for _, b := range []*binaryBuild{&build, &raceBuild} {
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
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
