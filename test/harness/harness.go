// Package harness is the one process harness of the tests that run real
// `reconciler serve` processes (test/system, test/e2e, test/github,
// test/preview and any new one): it builds the binary once per test
// process, starts N nodes on 127.0.0.1 with a real git server, waits for
// them, talks to their HTTP API with typed answers, and disrupts them.
//
//   - Binary and RaceBinary build ./cmd/reconciler once; Main, the
//     package's TestMain, deletes them at the end.
//   - NewRepo starts a git server (internal/gittest, git http-backend)
//     holding the policy repository, seeded with tree 0, and a user's clone
//     that pushes: Write(k) makes tree k main's head, Push any files.
//   - Tree, WebPolicy, Expect, ProbeRule and Requests are the policy
//     fixtures: every answer of Policy names the tree (the promotion) it
//     came from.
//   - StartCluster starts ClusterOptions.Size nodes (n1 bootstraps, the
//     others join) following opts.Repo, with extra config TOML in
//     opts.Extra or opts.Configure, and waits until all are ready. Every
//     process dies in t.Cleanup, which fails the test on a panic, a data
//     race or an exit nobody asked for, and prints the nodes' log tails
//     when the test failed.
//   - Cluster.Kill, Restart, Pause (SIGSTOP), Resume and Node.Terminate
//     (SIGTERM) disrupt nodes; a node keeps its addresses and data across
//     restarts.
//   - Cluster.Leader, WaitServing, WaitConverged, WaitActive and Promote
//     wait for what a test needs; Client.Status, Generation(s), Evaluate
//     and Reconcile read and drive the API with the answer types Status,
//     Generation, Decision, Experiment and Operation (answers.go: the
//     fields tests read, declared once).
//   - NewGitHub adds the GitHub emulator (internal/githubemu), wired to
//     the git server, and the [github] config that points nodes at it.
//
// Every wait is bounded and generous (see ReadyTimeout): a loaded machine
// makes a test slower, never wrong. A wait that times out fails the test
// with what it waited for and the last thing it saw. Eventually and
// WaitFor are the harness's waits, for the tests' own conditions.
//
// A minimal test:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
//	func TestPromote(t *testing.T) {
//		c := harness.StartCluster(t, harness.ClusterOptions{Size: 3, Repo: harness.NewRepo(t, harness.RepoOptions{})})
//		c.Promote(1)
//		c.WaitServing(1, nil, harness.PromoteTimeout)
//	}
//
// It is imported only by tests.
package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// own without the secrets a default config names (so a node needs no token
// unless the test gives one) and without the developer's git configuration
// or prompts, plus extra ("NAME=value") entries.
func ChildEnv(extra ...string) []string {
	drop := map[string]bool{"RECONCILER_TOKEN": true, "GIT_TOKEN": true, "GITHUB_TOKEN": true, "GITHUB_WEBHOOK_SECRET": true}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	return append(env, extra...)
}

// FreeAddrs returns n distinct free 127.0.0.1 addresses. They are picked
// below the kernel's ephemeral port range, at random, and checked free:
// a port the kernel handed out for ":0" is closed before the node binds
// it, and in that window any outgoing connection of any process (the
// kernel takes those from the same range) could take it, which made a node
// fail with "address already in use" under a parallel `go test ./...`.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := listenFree()
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}

// handedOut are the ports FreeAddrs returned in this process.
var handedOut sync.Map

// listenFree listens on a random unused port below the ephemeral range,
// or on ":0" where that range is unknown.
func listenFree() (net.Listener, error) {
	low := ephemeralLow()
	for range 200 {
		if low <= 10_000 {
			break
		}
		port := 10_000 + rand.IntN(low-10_000)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// or 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, _ := strconv.Atoi(f[0])
	return low
}

// Main is the TestMain of a package using the harness: it keeps every git
// the tests run away from the developer's configuration, runs the tests,
// deletes the binaries the harness built, and exits.
func Main(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}
