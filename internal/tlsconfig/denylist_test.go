package tlsconfig_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

func TestParseDenylist(t *testing.T) {
	got, err := tlsconfig.ParseDenylist([]byte("# revoked n3, 2026-11-28\n" +
		"serial=0A1B2C\n" +
		"0a:1b:2d   # colons, lower case\n" +
		"\n" +
		"dec:4242\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a1b2c", "a1b2d", "1092"} {
		if _, ok := got[want]; !ok {
			t.Errorf("%s missing from %v", want, got)
		}
	}
	for _, bad := range []string{"n3\n", "serial=XYZ\n", "dec:12a\n", "-5\n"} {
		if _, err := tlsconfig.ParseDenylist([]byte(bad)); err == nil {
			t.Errorf("ParseDenylist(%q) accepted it", bad)
		}
	}
}

// serialOf is id's certificate serial as an operator writes it.
func serialOf(t *testing.T, dir, id string) string {
	t.Helper()
	m, err := tlsconfig.Load(tlsconfig.DirFiles(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	return tlsconfig.SerialHex(m.Cert.Leaf)
}

// echoMux serves node's port and echoes lines on every raft and HTTP
// connection.
func echoMux(t *testing.T, node *tlsconfig.Node, logger hclog.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := tlsconfig.NewMux(ln, node, logger)
	t.Cleanup(func() { _ = m.Close() })
	for _, p := range []string{tlsconfig.ProtoRaft, tlsconfig.ProtoHTTP} {
		go func() {
			for {
				c, err := m.Listener(p).Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					r := bufio.NewReader(c)
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if _, err := c.Write([]byte(line)); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
	return ln.Addr().String()
}

// echo sends a line on c and reads it back; an error when the other side
// closed the connection.
func echo(c net.Conn, line string) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return errors.New("echoed " + got)
	}
	return nil
}

// TestDenylistRefusesCertificates: a certificate of the cluster CA whose
// serial is on the denylist fails the handshake on the node port (raft and
// HTTP) and as a server when dialled; a serial added to the file takes
// effect without a restart, on new connections and on open ones.
func TestDenylistRefusesCertificates(t *testing.T) {
	dir := newCluster(t, "n1", "n2", "n3")
	deny := filepath.Join(t.TempDir(), "denied.txt")
	if err := os.WriteFile(deny, []byte("serial="+serialOf(t, dir, "n2")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	n1, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, "n1"), DenyFile: deny, CheckInterval: -1,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoMux(t, n1, hclog.New(&hclog.LoggerOptions{Output: &logs}))
	ctx := context.Background()
	for _, proto := range []string{tlsconfig.ProtoRaft, tlsconfig.ProtoHTTP} {
		if c, err := newNode(t, dir, "n2", nil).Dial(ctx, addr, proto, "n1"); err == nil {
			if echo(c, "hello") == nil {
				t.Errorf("%s: the denied certificate of n2 was served", proto)
			}
			_ = c.Close()
		}
	}
	n3, err := newNode(t, dir, "n3", nil).Dial(ctx, addr, tlsconfig.ProtoHTTP, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer n3.Close()
	if err := echo(n3, "before"); err != nil {
		t.Fatalf("n3, not denied: %v", err)
	}
	n2addr := echoMux(t, newNode(t, dir, "n2", nil), nil)
	if _, err := n1.Dial(ctx, n2addr, tlsconfig.ProtoRaft, "n2"); !errors.Is(err, tlsconfig.ErrDenied) {
		t.Errorf("n1 dialling the denied n2 = %v, want ErrDenied", err)
	}

	// n3 is denied too: the file is reloaded, its open connection ends at
	// its next request, and a new one fails the handshake.
	f, err := os.OpenFile(deny, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(strings.ToLower(serialOf(t, dir, "n3")) + " # n3 too\n")
	_ = f.Close()
	if err := echo(n3, "after"); err == nil {
		t.Error("n3's open connection was served after its certificate was denied")
	}
	if c, err := newNode(t, dir, "n3", nil).Dial(ctx, addr, tlsconfig.ProtoRaft, "n1"); err == nil {
		if echo(c, "again") == nil {
			t.Error("a new connection of n3 was served after its certificate was denied")
		}
		_ = c.Close()
	}
	for _, want := range []string{"refused a node-to-node connection", "certificate is on the denylist", "reloaded the certificate denylist"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestDenylistMustLoad: a denylist that does not load stops the node at
// start (a typo must not leave a compromised certificate working), and a
// later change that does not load keeps the loaded list.
func TestDenylistMustLoad(t *testing.T) {
	dir := newCluster(t, "n1")
	deny := filepath.Join(t.TempDir(), "denied.txt")
	for _, content := range []string{"", "n2's certificate\n"} {
		if content != "" {
			if err := os.WriteFile(deny, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, "n1"), DenyFile: deny}); err == nil {
			t.Errorf("a node started with the denylist %q", content)
		}
	}
}
