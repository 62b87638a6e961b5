package gitsource

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/policy"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInitFromDirIsIdempotentAndUsableByGit(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, baseFiles())
	writeTree(t, src, map[string]string{".git/config": "not seeded", "policies/.git/x": "nor this"})
	if err := os.Chmod(filepath.Join(src, "README.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "data", "policies.git")
	ctx := context.Background()
	created, err := InitFromDir(ctx, bare, src, "main", commitTime)
	if err != nil || !created {
		t.Fatalf("InitFromDir = %v, %v", created, err)
	}
	srv := gittest.NewServer(t, gittest.Options{}) // for its git CLI helpers
	head := srv.Git(bare, "rev-parse", "refs/heads/main")
	if got := srv.Git(bare, "rev-list", "--count", "main"); got != "1" {
		t.Errorf("%s commits, want one", got)
	}
	if got := srv.Git(bare, "ls-tree", "-r", "main", "README.md"); !strings.HasPrefix(got, "100755 ") {
		t.Errorf("the executable bit was lost: %q", got)
	}
	if out := srv.Git(bare, "ls-tree", "-r", "--name-only", "main"); strings.Contains(out, ".git/") || strings.Count(out, "\n")+1 != len(baseFiles()) {
		t.Errorf("tree:\n%s", out)
	}
	if out := srv.Git(bare, "fsck", "--strict"); strings.Contains(out, "error") {
		t.Errorf("fsck: %s", out)
	}

	// A second start leaves it alone, even from another directory.
	created, err = InitFromDir(ctx, bare, t.TempDir(), "main", time.Now())
	if err != nil || created || srv.Git(bare, "rev-parse", "refs/heads/main") != head {
		t.Fatalf("second InitFromDir = %v, %v", created, err)
	}

	// A user clones it with the git CLI, edits, pushes; Fetch sees it.
	s := newSource(t, Config{URL: bare})
	if refs := mustFetch(t, s); refs.Main.Hash != head {
		t.Fatalf("Main = %v, want %s", refs.Main, head)
	}
	work := srv.Clone(bare)
	pushed := srv.Commit(work, map[string]string{"policies/beta/policy.toml": policyFile("deny", "", "true")}, "tighten beta")
	srv.Push(work, "main")
	if refs := mustFetch(t, s); refs.Main.Hash != pushed {
		t.Fatalf("Main = %v, want the pushed %s", refs.Main, pushed)
	}
	changed, err := s.ChangedPolicies(head, pushed)
	if err != nil || strings.Join(changed, ",") != "beta" {
		t.Errorf("changed = %v, %v", changed, err)
	}
}

func TestInitFromDirRefusesANonRepository(t *testing.T) {
	dir := t.TempDir()
	if _, err := InitFromDir(context.Background(), dir, t.TempDir(), "main", commitTime); err == nil {
		t.Fatal("an existing directory that is not a repository was accepted")
	}
}

func TestInitFromTheExamplePolicies(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "policies.git")
	if _, err := InitFromDir(context.Background(), bare, filepath.Join("..", "..", "policies.example"), "main", commitTime); err != nil {
		t.Fatal(err)
	}
	s := newSource(t, Config{URL: bare, Path: "."})
	refs := mustFetch(t, s)
	files, err := s.Files(refs.Main.Hash)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := policy.Load(FilesFS(files), policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if names := policyNames(repo); strings.Join(names, ",") != "admin-api,edge-firewall" {
		t.Errorf("policies = %v", names)
	}
}
