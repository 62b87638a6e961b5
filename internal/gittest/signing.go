package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SigningKey makes an ed25519 SSH key with ssh-keygen, for commits that
// git signs (gpg.format = ssh). It returns the private key's path and the
// key's line for an allowed-signers file:
// `name@example.com namespaces="git" ssh-ed25519 AAAA… name`.
func SigningKey(t testing.TB, name string) (keyPath, allowedSigner string) {
	t.Helper()
	keyPath = filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", keyPath).CombinedOutput(); err != nil {
		t.Fatalf("gittest: ssh-keygen (needed for signed commits): %v: %s", err, out)
	}
	pub, err := os.ReadFile(keyPath + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return keyPath, name + `@example.com namespaces="git" ` + strings.TrimSpace(string(pub))
}

// SignWith makes the next commits of the clone dir signed with the SSH
// key at keyPath (from SigningKey), or unsigned when keyPath is "".
func (s *Server) SignWith(dir, keyPath string) {
	s.t.Helper()
	if keyPath == "" {
		s.Git(dir, "config", "commit.gpgsign", "false")
		return
	}
	s.Git(dir, "config", "gpg.format", "ssh")
	s.Git(dir, "config", "user.signingkey", keyPath)
	s.Git(dir, "config", "commit.gpgsign", "true")
}
