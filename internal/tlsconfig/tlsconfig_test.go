package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
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

// newCluster writes a CA and the certificates of ids into a new directory.
func newCluster(t *testing.T, ids ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := tlsconfig.CreateCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := tlsconfig.CreateNode(dir, id, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newNode(t *testing.T, dir, id string, logger hclog.Logger) *tlsconfig.Node {
	t.Helper()
	n, err := tlsconfig.NewNode(tlsconfig.Config{Files: tlsconfig.DirFiles(dir, id), Logger: logger, CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serveMux starts a mux for node on loopback and echoes one line on every
// accepted raft connection, naming the peer.
func serveMux(t *testing.T, node *tlsconfig.Node, logger hclog.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := tlsconfig.NewMux(ln, node, logger)
	t.Cleanup(func() { _ = m.Close() })
	go func() {
		for {
			c, err := m.Listener(tlsconfig.ProtoRaft).Accept()
			if err != nil {
				return
			}
			id, _ := tlsconfig.ConnPeerID(c)
			_, _ = io.WriteString(c, "hello "+id+"\n")
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

func readLine(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMutualTLSAcceptsClusterNodesOnly(t *testing.T) {
	dir := newCluster(t, "n1", "n2")
	other := newCluster(t, "n2")
	var logs testlog.Buffer
	addr := serveMux(t, newNode(t, dir, "n1", nil), hclog.New(&hclog.LoggerOptions{Output: &logs}))
	ctx := context.Background()

	c, err := newNode(t, dir, "n2", nil).Dial(ctx, addr, tlsconfig.ProtoRaft, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, c); got != "hello n2\n" {
		t.Errorf("server saw %q, want the peer n2", got)
	}
	// The client checks the server's identity too.
	if _, err := newNode(t, dir, "n2", nil).Dial(ctx, addr, tlsconfig.ProtoRaft, "n3"); err == nil ||
		!strings.Contains(err.Error(), `is "n1", not "n3"`) {
		t.Errorf("dial expecting n3 = %v", err)
	}
	// A certificate from another CA, no certificate, plaintext: refused.
	if c, err := newNode(t, other, "n2", nil).Dial(ctx, addr, tlsconfig.ProtoRaft, ""); err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a certificate from another CA was accepted")
		}
	}
	noCert := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{tlsconfig.ProtoRaft}} //nolint:gosec // the attacker
	if c, err := tls.Dial("tcp", addr, noCert); err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a client without a certificate was accepted")
		}
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = raw.Write([]byte{0, 0x85, 0xa4, 'T', 'e', 'r', 'm'})
	if _, err := raw.Read(make([]byte, 64)); err == nil {
		t.Error("plaintext got an answer")
	}
	if !strings.Contains(logs.String(), "refused a node-to-node connection") {
		t.Errorf("refusals not logged:\n%s", logs.String())
	}
}

func TestCertificateRotationWithoutRestart(t *testing.T) {
	dir := newCluster(t, "n1", "n2")
	server := newNode(t, dir, "n1", nil)
	addr := serveMux(t, server, nil)
	client := newNode(t, dir, "n2", nil)
	serial := func() string {
		c, err := client.Dial(context.Background(), addr, tlsconfig.ProtoRaft, "n1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	// Issue a new certificate for n1 and put it in place.
	f := tlsconfig.DirFiles(dir, "n1")
	if err := os.Remove(f.Cert); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconfig.CreateNode(dir, "n1", nil, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if after := serial(); after == before {
		t.Errorf("the server still presents certificate %s after rotation", before)
	}
}

func TestReloadKeepsIdentityAndGoodMaterial(t *testing.T) {
	dir := newCluster(t, "n1", "n2")
	var logs testlog.Buffer
	n := newNode(t, dir, "n1", hclog.New(&hclog.LoggerOptions{Output: &logs}))
	first := n.Current()
	// A half-written rotation (a key that does not match) keeps the old
	// material, and so does a certificate naming another node.
	f := tlsconfig.DirFiles(dir, "n1")
	n2 := tlsconfig.DirFiles(dir, "n2")
	copyFile(t, n2.Key, f.Key)
	if n.Current() != first {
		t.Error("a mismatched key replaced the loaded material")
	}
	copyFile(t, n2.Cert, f.Cert)
	if got := n.Current(); got != first || got.ID != "n1" {
		t.Errorf("a certificate naming n2 was loaded for n1: %v", got.ID)
	}
	if !strings.Contains(logs.String(), `names node \"n2\"`) && !strings.Contains(logs.String(), `names node "n2"`) {
		t.Errorf("refused reload not logged:\n%s", logs.String())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A distinct modification time even on coarse file systems.
	later := time.Now().Add(time.Duration(len(b)) * time.Millisecond)
	if err := os.Chtimes(to, later, later); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRefusesMaterialPeersWouldRefuse(t *testing.T) {
	dir := newCluster(t, "n1")
	other := newCluster(t, "n1")
	f := tlsconfig.DirFiles(dir, "n1")
	cases := map[string]tlsconfig.Files{
		"other CA":   {CA: filepath.Join(other, tlsconfig.CAFile), Cert: f.Cert, Key: f.Key},
		"key as CA":  {CA: f.Key, Cert: f.Cert, Key: f.Key},
		"cert as CA": {CA: f.Cert, Cert: f.Cert, Key: f.Key},
		"other key":  {CA: f.CA, Cert: f.Cert, Key: tlsconfig.DirFiles(other, "n1").Key},
		"missing":    {CA: f.CA, Cert: f.Cert + ".nope", Key: f.Key},
	}
	for name, files := range cases {
		if _, err := tlsconfig.Load(files); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	m, err := tlsconfig.Load(f)
	if err != nil || m.ID != "n1" {
		t.Fatalf("Load = %v, %v", m, err)
	}
	// A CA certificate names no node: it cannot serve as one.
	ca, _ := os.ReadFile(f.CA)
	caKey, _ := os.ReadFile(filepath.Join(dir, tlsconfig.CAKeyFile))
	if _, err := tlsconfig.Parse(ca, ca, caKey); !errors.Is(err, tlsconfig.ErrNoIdentity) {
		t.Errorf("CA as node certificate: %v", err)
	}
}

func TestCreateRefusesToOverwrite(t *testing.T) {
	dir := newCluster(t, "n1")
	if err := tlsconfig.CreateCA(dir, time.Hour); err == nil {
		t.Error("CreateCA replaced the CA")
	}
	if _, err := tlsconfig.CreateNode(dir, "n1", nil, time.Hour); err == nil {
		t.Error("CreateNode replaced n1's certificate")
	}
	if _, err := tlsconfig.CreateNode(dir, "bad/id", nil, time.Hour); err == nil {
		t.Error("CreateNode accepted a bad id")
	}
}

// TestCARotation: a node trusts a new CA once its ca_file holds it next
// to the old one, without a restart, and the refusal before is real.
func TestCARotation(t *testing.T) {
	oldCA := newCluster(t, "n1")
	newCA := newCluster(t, "n2")
	server := newNode(t, oldCA, "n1", nil)
	addr := serveMux(t, server, nil)
	// n2's certificate is from the new CA; it trusts both already.
	bundle := func(dirs ...string) []byte {
		var b []byte
		for _, d := range dirs {
			c, err := os.ReadFile(filepath.Join(d, tlsconfig.CAFile))
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, c...)
		}
		return b
	}
	if err := os.WriteFile(filepath.Join(newCA, tlsconfig.CAFile), bundle(newCA, oldCA), 0o644); err != nil {
		t.Fatal(err)
	}
	client := newNode(t, newCA, "n2", nil)
	dial := func() error {
		c, err := client.Dial(context.Background(), addr, tlsconfig.ProtoRaft, "n1")
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c) // TLS 1.3: the server's verdict arrives after the client's handshake
		if err == nil && string(got) != "hello n2\n" {
			err = errors.New(string(got))
		}
		return err
	}
	if err := dial(); err == nil {
		t.Fatal("n1 accepted a CA it does not trust yet")
	}
	copyBytes(t, filepath.Join(oldCA, tlsconfig.CAFile), bundle(oldCA, newCA))
	if err := dial(); err != nil {
		t.Errorf("after adding the new CA to n1's ca_file: %v", err)
	}
}

func copyBytes(t *testing.T, to string, b []byte) {
	t.Helper()
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(to, later, later); err != nil {
		t.Fatal(err)
	}
}
