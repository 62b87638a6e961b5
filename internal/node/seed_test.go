package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// Issue 14, failure 6: a node that restarts and finds the repository of
// git.url gone does not re-create it from git.init_from (that would offer
// the seed's policies as a new history): it reports a PullError and keeps
// serving its generation.
func TestRestartDoesNotReseedAMissingRepository(t *testing.T) {
	cfg := singleNode(t, webPolicy(1))
	m := &Main{Config: cfg, Logger: testLogger(t)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()
	eventually(t, waitTimeout, "generation 1", func() error { return serves(base, 1) })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cfg.Git.URL); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(cfg.Git.InitFrom, "web", "policy.toml"), webPolicy(2))

	m = startNode(t, cfg)
	base = "http://" + m.Addr()
	eventually(t, waitTimeout, "the PullError", func() error {
		var st struct {
			Source struct{ Error string } `json:"source"`
		}
		call(t, http.MethodGet, base+"/v1/status", "", &st)
		if st.Source.Error == "" {
			return fmt.Errorf("source %+v", st.Source)
		}
		return nil
	})
	if _, err := os.Stat(cfg.Git.URL); err == nil {
		t.Fatal("the missing repository was seeded again")
	}
	if err := serves(base, 1); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	d, _, err := evaluate(base, "/v1", 0)
	if err != nil || d.Generation != 1 || d.Rule != "v1" {
		t.Errorf("decision %+v %v", d, err)
	}
}
