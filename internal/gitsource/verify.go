package gitsource

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"
)

// ErrUnverified is what VerifyCommit's error wraps: the commit carries no
// signature of a trusted key, so it must not become a generation.
var ErrUnverified = errors.New("commit signature not verified")

// Verifier checks commit signatures against trusted keys ([git] verify =
// "signed"): OpenPGP keys from an armoured keyring (as `gpg --export
// --armor` writes it; GitHub's web-flow key for merges made on GitHub)
// and SSH keys from an allowed-signers file (git's
// gpg.ssh.allowedSignersFile format). It is fail-closed: no signature, an
// unknown key, a bad signature or more than one signature is an error.
type Verifier struct {
	keyring string // armoured OpenPGP keyring, "" for none
	ssh     [][]byte
}

// NewVerifier parses the trusted keys; at least one must be given.
func NewVerifier(armoredKeyring, allowedSigners []byte) (*Verifier, error) {
	v := &Verifier{}
	if len(bytes.TrimSpace(armoredKeyring)) > 0 {
		// go-git parses the keyring again for every commit; parsing it here
		// makes a broken file stop the node at start.
		if _, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armoredKeyring)); err != nil {
			return nil, fmt.Errorf("gitsource: the OpenPGP keyring: %w", err)
		}
		v.keyring = string(armoredKeyring)
	}
	keys, err := parseAllowedSigners(allowedSigners)
	if err != nil {
		return nil, err
	}
	v.ssh = keys
	if v.keyring == "" && len(v.ssh) == 0 {
		return nil, errors.New("gitsource: signed commits need trusted keys: an OpenPGP keyring or SSH allowed signers")
	}
	return v, nil
}

// Verify reports who signed c, or an error wrapping ErrUnverified.
func (v *Verifier) Verify(c *object.Commit) (string, error) {
	sig := c.PGPSignature
	switch {
	case sig == "":
		return "", fmt.Errorf("%w: commit %s is not signed", ErrUnverified, c.Hash)
	case strings.HasPrefix(sig, "-----BEGIN SSH SIGNATURE-----"):
		msg, err := unsignedBytes(c)
		if err != nil {
			return "", err
		}
		fp, err := v.verifySSH(sig, msg)
		if err != nil {
			return "", fmt.Errorf("%w: commit %s: %v", ErrUnverified, c.Hash, err)
		}
		return fp, nil
	case strings.HasPrefix(sig, "-----BEGIN PGP SIGNATURE-----"):
		if v.keyring == "" {
			return "", fmt.Errorf("%w: commit %s has an OpenPGP signature and no OpenPGP key is trusted", ErrUnverified, c.Hash)
		}
		e, err := c.Verify(v.keyring)
		if err != nil {
			return "", fmt.Errorf("%w: commit %s: %v", ErrUnverified, c.Hash, err)
		}
		return fmt.Sprintf("openpgp:%X", e.PrimaryKey.Fingerprint), nil
	}
	return "", fmt.Errorf("%w: commit %s carries a signature of an unknown kind", ErrUnverified, c.Hash)
}

// unsignedBytes is the commit as it was signed: encoded without gpgsig.
func unsignedBytes(c *object.Commit) ([]byte, error) {
	o := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(o); err != nil {
		return nil, err
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// VerifyCommit checks the signature of a commit of the live branch when
// Config.Verifier is set; without one every commit passes. Commits this
// Source wrote itself (Revert, CommitPolicy, CommitMerge: a rollback or
// an experiment's commit, asked for through the API by a caller with the
// role) pass too: the leader cannot sign them, and no git credential
// can make it write them.
func (s *Source) VerifyCommit(hash string) (string, error) {
	if s.cfg.Verifier == nil {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(hash)
	if err != nil {
		return "", err
	}
	if s.own[c.Hash] {
		return "reconciler", nil
	}
	return s.cfg.Verifier.Verify(c)
}

// trustOwn records a commit this Source wrote; the caller holds mu.
func (s *Source) trustOwn(h plumbing.Hash) {
	if s.own == nil {
		s.own = map[plumbing.Hash]bool{}
	}
	s.own[h] = true
}

// sshSigMagic starts an SSH signature blob and the data it signs
// (OpenSSH PROTOCOL.sshsig).
const sshSigMagic = "SSHSIG"

// verifySSH checks an armoured SSH signature of msg in the "git"
// namespace by one of the allowed keys; it returns the key's fingerprint.
func (v *Verifier) verifySSH(armored string, msg []byte) (string, error) {
	blob, err := parseSSHSig(armored)
	if err != nil {
		return "", err
	}
	if blob.Namespace != "git" {
		return "", fmt.Errorf("SSH signature for namespace %q, not git", blob.Namespace)
	}
	var h hash.Hash
	switch blob.HashAlg {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return "", fmt.Errorf("SSH signature hash %q", blob.HashAlg)
	}
	if !v.allowedSSH(blob.PublicKey) {
		return "", errors.New("signed by an SSH key that is not an allowed signer")
	}
	pub, err := ssh.ParsePublicKey(blob.PublicKey)
	if err != nil {
		return "", fmt.Errorf("SSH signature key: %v", err)
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(blob.Signature, &sig); err != nil {
		return "", errors.New("malformed SSH signature")
	}
	h.Write(msg)
	signed := append([]byte(sshSigMagic), ssh.Marshal(struct {
		Namespace, Reserved, HashAlg string
		Hash                         []byte
	}{blob.Namespace, blob.Reserved, blob.HashAlg, h.Sum(nil)})...)
	if err := pub.Verify(signed, &sig); err != nil {
		return "", errors.New("bad SSH signature")
	}
	return ssh.FingerprintSHA256(pub), nil
}

// sshSig is an SSH signature blob after its magic.
type sshSig struct {
	Version   uint32
	PublicKey []byte
	Namespace string
	Reserved  string
	HashAlg   string
	Signature []byte
}

func parseSSHSig(armored string) (*sshSig, error) {
	block, _ := pem.Decode([]byte(armored))
	if block == nil || block.Type != "SSH SIGNATURE" || !bytes.HasPrefix(block.Bytes, []byte(sshSigMagic)) {
		return nil, errors.New("malformed SSH signature")
	}
	var blob sshSig
	if err := ssh.Unmarshal(block.Bytes[len(sshSigMagic):], &blob); err != nil || blob.Version != 1 {
		return nil, errors.New("malformed SSH signature")
	}
	return &blob, nil
}

func (v *Verifier) allowedSSH(wire []byte) bool {
	for _, k := range v.ssh {
		if bytes.Equal(k, wire) {
			return true
		}
	}
	return false
}

// parseAllowedSigners reads git's allowed-signers format: per line,
// principals, optional options, then the key ("alice@example.com
// namespaces=\"git\" ssh-ed25519 AAAA… comment"). The key is what is
// trusted; principals are not matched against the committer. Lines with
// cert-authority are refused (certificates are not supported), as are
// keys restricted to namespaces other than git.
func parseAllowedSigners(data []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		_, rest, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("gitsource: allowed signers line %d: no key", n)
		}
		pub, _, options, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(rest)))
		if err != nil {
			return nil, fmt.Errorf("gitsource: allowed signers line %d: %v", n, err)
		}
		if skip, err := signerOptions(options); err != nil {
			return nil, fmt.Errorf("gitsource: allowed signers line %d: %v", n, err)
		} else if skip {
			continue
		}
		keys = append(keys, pub.Marshal())
	}
	return keys, sc.Err()
}

// signerOptions reports whether a line's options keep it from signing
// git commits (skip), or refuses options this verifier cannot honour.
func signerOptions(options []string) (skip bool, err error) {
	for _, o := range options {
		name, val, _ := strings.Cut(o, "=")
		switch strings.ToLower(name) {
		case "cert-authority", "valid-after", "valid-before":
			return false, fmt.Errorf("option %s is not supported", name)
		case "namespaces":
			found := false
			for _, ns := range strings.Split(strings.Trim(val, `"`), ",") {
				found = found || ns == "git"
			}
			if !found {
				return true, nil
			}
		}
	}
	return false, nil
}
