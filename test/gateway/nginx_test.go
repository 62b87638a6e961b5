package gateway

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// The example addresses of testdata/nginx-gateway.conf (and so of
// docs/gateways.md); the tests replace each with a port they picked.
const (
	docNodes    = "127.0.0.1:8181 127.0.0.1:8182 127.0.0.1:8183"
	docBackend  = "127.0.0.1:8080"
	docListen   = "127.0.0.1:8000"
	gatewayConf = "nginx-gateway.conf"
	checkConf   = "reconciler-check.conf"
)

// nginxMain wraps the documented configuration so that nginx runs as a
// child of the test: in the foreground, one process, every file in dir.
const nginxMain = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/tmp/body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
    include %[2]s;
}
`

// nginx is one nginx process started by startNginx.
type nginx struct {
	Addr string // where it listens
	dir  string
	done chan struct{}
}

// nginxBinary finds nginx (Debian installs it in /usr/sbin, which a
// non-root PATH may lack); it fails the test when nginx is missing:
// `make deps` installs it.
func nginxBinary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Fatal("nginx is not installed: run `make deps` (scripts/deps.sh installs Debian's nginx-light)")
	return ""
}

// renderGateway returns the documented configuration with the example
// addresses replaced by nodes, backend and listen. It fails the test if an
// example address is missing, so the doc and the test cannot drift apart.
func renderGateway(t testing.TB, nodes []string, backend, listen string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", gatewayConf))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(data)
	examples := strings.Fields(docNodes)
	if len(nodes) > len(examples) {
		t.Fatalf("%d nodes, the configuration has %d", len(nodes), len(examples))
	}
	repl := map[string]string{docBackend: backend, docListen: listen}
	for i, ex := range examples {
		if i < len(nodes) {
			repl[ex] = nodes[i]
		} else {
			repl["    server "+ex+";\n"] = "" // fewer nodes than the example
		}
	}
	for from, to := range repl {
		if !strings.Contains(conf, from) {
			t.Fatalf("%s no longer contains %q", gatewayConf, from)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	return conf
}

// startNginx runs nginx with conf (a rendered nginx-gateway.conf) listening
// on listen, and waits until it accepts connections. It is killed in
// t.Cleanup, which prints its error log when the test failed.
func startNginx(t testing.TB, conf, listen string) *nginx {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	check, err := os.ReadFile(filepath.Join("testdata", checkConf))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"nginx.conf": fmt.Sprintf(nginxMain, dir, gatewayConf),
		gatewayConf:  conf,
		checkConf:    string(check),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -p: relative includes resolve in dir; -e: even the early errors go
	// to dir, not to /var/log/nginx.
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	out, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nginx{Addr: listen, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); out.Close(); close(n.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-n.done
		if t.Failed() {
			t.Logf("nginx error log:\n%s", n.errorLog())
		}
	})
	err = harness.Eventually(10*time.Second, func() error {
		select {
		case <-n.done:
			return fmt.Errorf("nginx exited")
		default:
		}
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("nginx did not start: %v\n%s", err, n.errorLog())
	}
	return n
}

// errorLog is what nginx wrote to its error log and stderr.
func (n *nginx) errorLog() string {
	a, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	b, _ := os.ReadFile(filepath.Join(n.dir, "stderr.log"))
	return string(a) + string(b)
}

// Base is nginx's base URL.
func (n *nginx) Base() string { return "http://" + n.Addr }
