package config

import (
	"path/filepath"
	"testing"
)

// TestRepositoryConfig keeps the repository's own config.toml loadable.
func TestRepositoryConfig(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.ID != "node-1" || c.Node.HTTPAddr != "127.0.0.1:8181" || c.GitHub.Enabled() {
		t.Errorf("config.toml = %+v", c)
	}
}
