package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Load reads, decodes and validates the config file at path. Keys the file
// leaves out take their defaults; relative paths are resolved against the
// file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := Parse(data, filepath.Dir(abs))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse decodes and validates config.toml content. baseDir is the directory
// that relative paths are resolved against; "" leaves them relative.
func Parse(data []byte, baseDir string) (*Config, error) {
	c := Default()
	md, err := toml.Decode(string(data), c)
	if err != nil {
		return nil, err
	}
	if err := unknownKeys(md.Undecoded()); err != nil {
		return nil, err
	}
	if !md.IsDefined("node", "data_dir") {
		c.Node.DataDir = filepath.Join("data", c.Node.ID)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.resolvePaths(baseDir)
	return c, nil
}

// unknownKeys turns keys the schema does not know into one error naming them.
func unknownKeys(keys []toml.Key) error {
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, k.String())
	}
	sort.Strings(names)
	if len(names) == 1 {
		return fmt.Errorf("unknown key %q", names[0])
	}
	return fmt.Errorf("unknown keys %s", quoteAll(names))
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// resolvePaths makes relative local paths relative to baseDir.
func (c *Config) resolvePaths(baseDir string) {
	if baseDir == "" {
		return
	}
	c.Node.DataDir = resolve(baseDir, c.Node.DataDir)
	c.Git.InitFrom = resolve(baseDir, c.Git.InitFrom)
	c.TLS.CAFile = resolve(baseDir, c.TLS.CAFile)
	c.TLS.CertFile = resolve(baseDir, c.TLS.CertFile)
	c.TLS.KeyFile = resolve(baseDir, c.TLS.KeyFile)
	c.TLS.DenylistFile = resolve(baseDir, c.TLS.DenylistFile)
	if IsLocalPath(c.Git.URL) {
		c.Git.URL = resolve(baseDir, c.Git.URL)
	}
	c.API.resolvePaths(baseDir)
	c.Git.OpenPGPKeyringFile = resolve(baseDir, c.Git.OpenPGPKeyringFile)
	c.Git.SSHAllowedSignersFile = resolve(baseDir, c.Git.SSHAllowedSignersFile)
}

func resolve(baseDir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(baseDir, p)
}

// IsLocalPath reports whether a git.url is a plain filesystem path rather
// than a URL (scheme://...) or an scp-style address (user@host:path).
func IsLocalPath(url string) bool {
	if url == "" || strings.Contains(url, "://") {
		return false
	}
	colon := strings.IndexByte(url, ':')
	if colon < 0 {
		return true
	}
	// host:path or user@host:path, unless a slash comes before the colon.
	slash := strings.IndexByte(url, '/')
	return slash >= 0 && slash < colon
}

// errs collects validation problems, each prefixed by its key.
type errs []error

func (e *errs) add(key, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

func (e errs) err() error { return errors.Join(e...) }
