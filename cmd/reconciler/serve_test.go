package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	rversion "github.com/policyrollout/reconciler/internal/version"
	"github.com/policyrollout/reconciler/test/harness"
)

// writeServeConfig writes a config whose init_from is testdata/good.
func writeServeConfig(t *testing.T, httpAddr, logFormat string) string {
	t.Helper()
	seed, err := filepath.Abs("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	content := fmt.Sprintf(`
[node]
id = "node-t"
http_addr = %q
raft_addr = "127.0.0.1:0"
data_dir = "data"
bootstrap = true

[git]
init_from = %q

[log]
level = "info"
format = %q
`, httpAddr, seed, logFormat)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// listenAddr finds the "listening" line of a JSON log and returns its addr.
func listenAddr(line string) string {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil || m["@message"] != "listening" {
		return ""
	}
	addr, _ := m["addr"].(string)
	return addr
}

func TestServeInProcess(t *testing.T) {
	path := writeServeConfig(t, "127.0.0.1:0", "json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testlog.Buffer
	a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	done := make(chan int, 1)
	go func() { done <- a.run([]string{"serve", "--config", path, "--node-id", "node-x"}) }()

	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); {
		for _, line := range strings.Split(errOut.String(), "\n") {
			if addr = listenAddr(line); addr != "" {
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited early with %d: %s", code, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if addr == "" {
		t.Fatalf("no listening line in: %s", errOut.String())
	}
	decide(t, "http://"+addr)
	if !strings.Contains(errOut.String(), `"node_id":"node-x"`) {
		t.Errorf("--node-id not applied: %s", errOut.String())
	}
	if !strings.Contains(errOut.String(), "node-to-node traffic is not authenticated") {
		t.Errorf("no warning that loopback without [tls] is unauthenticated: %s", errOut.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exit = %d: %s", code, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// decide waits for readiness and checks one decision.
func decide(t *testing.T, base string) {
	t.Helper()
	waitReady(t, base)
	resp, err := http.Post(base+"/v1/policies/web:evaluate", "application/json", strings.NewReader(`{"path":"/healthz"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"decision":"ALLOW","rule":"health"`) {
		t.Fatalf("decision = %d %s", resp.StatusCode, body)
	}
}

// waitReady waits (test/harness's bound) until base's /readyz answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	cl := harness.NewClient(10*time.Second, 0)
	harness.WaitFor(t, harness.ReadyTimeout, base+" ready", func() error {
		code, body, err := cl.Get(base + "/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("readyz %d %s", code, body)
		}
		return err
	})
}

func TestServeFlagsOverride(t *testing.T) {
	c := config.Default()
	c.Node.Bootstrap = true
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	args := []string{"--node-id", "n9", "--http-addr", "127.0.0.1:9", "--raft-addr", "127.0.0.1:10",
		"--data-dir", "rel/dir", "--join", "10.0.0.1:8181,10.0.0.2:8181", "--join", "10.0.0.3:8181"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(c, setFlags(fs)); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if c.Node.ID != "n9" || c.Node.HTTPAddr != "127.0.0.1:9" || c.Node.RaftAddr != "127.0.0.1:10" ||
		c.Node.DataDir != filepath.Join(wd, "rel/dir") || len(c.Node.Join) != 3 || c.Node.Bootstrap {
		t.Errorf("node = %+v", c.Node)
	}
	// --bootstrap together with --join is refused by validation.
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	f = serveFlags{}
	f.register(fs)
	_ = fs.Parse([]string{"--bootstrap", "--join", "10.0.0.1:1"})
	if err := f.apply(config.Default(), setFlags(fs)); err == nil || !strings.Contains(err.Error(), "node.bootstrap") {
		t.Errorf("bootstrap+join: %v", err)
	}
}

// TestServeBinary builds the real binary, runs `serve` as a process on
// loopback, makes a decision over HTTP, and stops it with SIGTERM.
func TestServeBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "reconciler")
	build := exec.Command("go", "build", "-ldflags", "-X main.commit=abc1234", "-o", bin, ".") // as make build

	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.Contains(string(out), "version: "+rversion.Current+"\ncommit: abc1234\n") {
		t.Errorf("version = %q %v", out, err)
	}
	if err := exec.Command(bin, "nope").Run(); exitCode(err) != exitUsage {
		t.Errorf("unknown command exit = %v", err)
	}

	cmd := exec.Command(bin, "serve", "--config", writeServeConfig(t, "127.0.0.1:0", "json"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	addrCh := make(chan string, 1)
	scanned := make(chan struct{})
	var logs testlog.Buffer
	go func() {
		defer close(scanned)
		scanLog(stderr, &logs, addrCh)
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line: %s", logs.String())
	}
	decide(t, "http://"+addr)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() {
		<-scanned // Wait closes the pipe: read the log to its end first.
		waitErr <- cmd.Wait()
	}()
	select {
	case err := <-waitErr:
		if err != nil {
			t.Errorf("serve exited with %v: %s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if !strings.Contains(logs.String(), `"@message":"stopped"`) {
		t.Errorf("no graceful stop in the log: %s", logs.String())
	}
}

// scanLog copies log lines into logs and sends the listening address once.
func scanLog(r io.Reader, logs *testlog.Buffer, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logs, line)
		if a := listenAddr(line); a != "" && !sent {
			addr <- a
			sent = true
		}
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}
