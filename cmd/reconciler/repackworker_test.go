package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/test/harness"
)

// TestRepackWorkerIsHidden: the child of a clone's housekeeping is not a
// command people are shown, and it refuses a missing or bad limit before
// reading anything.
func TestRepackWorkerIsHidden(t *testing.T) {
	if _, out, _ := cli(t, "", "help"); strings.Contains(out, gitsource.RepackCommand) {
		t.Fatalf("help lists the repack worker:\n%s", out)
	}
	for _, args := range [][]string{{}, {"0"}, {"lots"}, {"1", "2"}} {
		code, _, errOut := cli(t, "{}", append([]string{gitsource.RepackCommand}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "LIMIT") {
			t.Errorf("repack-worker %q = %d %q, want usage", args, code, errOut)
		}
	}
}

// TestRepackDefaultIsGitsources: [git] repack_memory_limit_bytes's default
// is the limit gitsource.RepackChild applies when given none.
func TestRepackDefaultIsGitsources(t *testing.T) {
	if got := config.Default().Git.RepackMemoryLimitBytes; got != gitsource.DefaultRepackMemoryLimit {
		t.Fatalf("[git] repack_memory_limit_bytes default %d, gitsource's %d", got, gitsource.DefaultRepackMemoryLimit)
	}
}

// TestHousekeepingInTheBinarysChild: a clone's housekeeping packs in the
// reconciler binary's repack-worker, and every version stays readable.
func TestHousekeepingInTheBinarysChild(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t, gittest.Options{})
	url := srv.InitRepo("policies", map[string]string{"policies/a/policy.toml": "default_action = \"allow\"\n"})
	work := srv.Clone(url)
	s, err := gitsource.Open(context.Background(), gitsource.Config{URL: url, Path: "policies",
		Dir: filepath.Join(t.TempDir(), "clone.git"), Logger: testlog.New(t),
		GC:     gitsource.GCLimits{LooseObjects: -1},
		Repack: gitsource.RepackChild{Path: harness.Binary(t)}})
	if err != nil {
		t.Fatal(err)
	}
	var commits []string
	for i := range 3 {
		if _, err := s.Fetch(context.Background()); err != nil {
			t.Fatal(err)
		}
		commits = append(commits, srv.Commit(work, map[string]string{
			"policies/a/policy.toml": fmt.Sprintf("default_action = \"deny\"\n# %d\n", i)}, "change"))
		srv.Push(work, "main")
	}
	if _, err := s.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := s.Housekeep(context.Background(), nil)
	if err != nil || !h.Ran || h.After.Packs != 1 || h.After.LooseObjects != 0 {
		t.Fatalf("Housekeep = %+v, %v; want one pack", h, err)
	}
	for _, c := range commits {
		if _, err := s.Files(c); err != nil {
			t.Errorf("Files(%s) after housekeeping: %v", c, err)
		}
	}
}
