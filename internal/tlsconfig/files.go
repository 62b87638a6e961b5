package tlsconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The file names `reconciler certs` uses in its directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// DirFiles are node id's files as CreateNode writes them in dir.
func DirFiles(dir, id string) Files {
	return Files{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, id+".pem"),
		Key: filepath.Join(dir, id+"-key.pem")}
}

// CreateCA writes a new cluster CA to dir (ca.pem, and ca-key.pem readable
// by the owner only). It refuses to overwrite an existing CA: every node
// certificate made from it would stop working.
func CreateCA(dir string, validity time.Duration) error {
	ca, err := NewCA("reconciler cluster CA", validity)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writePair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile), ca)
}

// CreateNode writes a certificate for node id, signed by the CA in dir, to
// dir/<id>.pem and dir/<id>-key.pem, and returns the node's Files. hosts
// are the extra addresses and names the node is reached at.
func CreateNode(dir, id string, hosts []string, validity time.Duration) (Files, error) {
	f := DirFiles(dir, id)
	var ca PEM
	var err error
	if ca.Cert, err = os.ReadFile(f.CA); err != nil {
		return Files{}, fmt.Errorf("%w (create the CA first: reconciler certs ca --dir %s)", err, dir)
	}
	if ca.Key, err = os.ReadFile(filepath.Join(dir, CAKeyFile)); err != nil {
		return Files{}, err
	}
	p, err := NewNodeCert(ca, id, hosts, validity)
	if err != nil {
		return Files{}, err
	}
	return f, writePair(f.Cert, f.Key, p)
}

// writePair writes a certificate and its key without replacing either.
func writePair(certPath, keyPath string, p PEM) error {
	for _, path := range []string{certPath, keyPath} {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s exists; remove it first to replace it", path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.WriteFile(keyPath, p.Key, 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, p.Cert, 0o644)
}
