package gitsource

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// gitCommit commits one file in a new repository with the git CLI, with
// extra -c settings (signing), and returns the commit as go-git reads it.
func gitCommit(t *testing.T, settings ...string) *object.Commit {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "f")
	run(append(append([]string{}, settings...), "commit", "-q", "-m", "m")...)
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sshSigned(t *testing.T, key string) *object.Commit {
	return gitCommit(t, "-c", "gpg.format=ssh", "-c", "user.signingkey="+key, "-c", "commit.gpgsign=true")
}

// pgpEntity makes an OpenPGP key and returns it with its armoured public key.
func pgpEntity(t *testing.T, name string) (*openpgp.Entity, []byte) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return e, buf.Bytes()
}

// pgpSigned is a commit signed by e, as go-git signs (git's own format).
func pgpSigned(t *testing.T, e *openpgp.Entity) *object.Commit {
	t.Helper()
	repo, err := git.PlainInit(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	h, err := wt.Commit("m", &git.CommitOptions{Author: sig, AllowEmptyCommits: true, SignKey: e})
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(h)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestVerifierSSH: a commit signed by real git with an allowed SSH key
// verifies; unsigned, another key's, a tampered commit and a key allowed
// only for another namespace do not.
func TestVerifierSSH(t *testing.T) {
	key, line := gittest.SigningKey(t, "alice")
	other, _ := gittest.SigningKey(t, "mallory")
	_, fileOnly := gittest.SigningKey(t, "files")
	fileOnly = strings.Replace(fileOnly, `namespaces="git"`, `namespaces="file"`, 1)
	v, err := NewVerifier(nil, []byte("# trusted\n"+line+"\n"+fileOnly+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	good := sshSigned(t, key)
	if who, err := v.Verify(good); err != nil || !strings.HasPrefix(who, "SHA256:") {
		t.Fatalf("signed by alice: %q, %v", who, err)
	}
	tampered := *good
	tampered.Message = "changed after signing"
	for name, c := range map[string]*object.Commit{"unsigned": gitCommit(t), "mallory": sshSigned(t, other), "tampered": &tampered} {
		if _, err := v.Verify(c); err == nil || !strings.Contains(err.Error(), ErrUnverified.Error()) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestVerifierOpenPGP: the same with an armoured OpenPGP keyring.
func TestVerifierOpenPGP(t *testing.T) {
	alice, ring := pgpEntity(t, "alice")
	mallory, _ := pgpEntity(t, "mallory")
	v, err := NewVerifier(ring, nil)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := v.Verify(pgpSigned(t, alice)); err != nil || !strings.HasPrefix(who, "openpgp:") {
		t.Fatalf("signed by alice: %q, %v", who, err)
	}
	if _, err := v.Verify(pgpSigned(t, mallory)); err == nil {
		t.Error("mallory's signature verified")
	}
	key, _ := gittest.SigningKey(t, "bob")
	if _, err := v.Verify(sshSigned(t, key)); err == nil {
		t.Error("an SSH signature verified without allowed signers")
	}
}

func TestNewVerifierRefusesBadKeys(t *testing.T) {
	for name, in := range map[string][2]string{
		"nothing":        {"", ""},
		"bad keyring":    {"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnope\n-----END PGP PUBLIC KEY BLOCK-----\n", ""},
		"bad signer":     {"", "alice@example.com ssh-ed25519 not-base64\n"},
		"cert-authority": {"", "*@example.com cert-authority ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"},
	} {
		if _, err := NewVerifier([]byte(in[0]), []byte(in[1])); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzVerifySSHSignature: arbitrary signature blocks never verify and
// never panic.
func FuzzVerifySSHSignature(f *testing.F) {
	f.Add("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n")
	f.Add("-----BEGIN SSH SIGNATURE-----\n\n-----END SSH SIGNATURE-----\n")
	f.Add("-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n")
	v, err := NewVerifier(nil, []byte("a@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig string) {
		c := &object.Commit{Hash: plumbing.ZeroHash, Message: "m", PGPSignature: sig}
		if _, err := v.Verify(c); err == nil {
			t.Fatalf("a fuzzed signature verified: %q", sig)
		}
	})
}
