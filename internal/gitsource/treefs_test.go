package gitsource

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/policy"
)

func TestFSReadsTheTreeAtACommit(t *testing.T) {
	_, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	refs := mustFetch(t, s)
	fsys, err := s.FS(refs.Main.Hash)
	if err != nil {
		t.Fatal(err)
	}
	// The io/fs conformance suite: Open, ReadDir, ReadFile, Stat, Glob, Sub.
	if err := fstest.TestFS(fsys, "alpha/policy.toml", "alpha/tests/t.toml", "_shared/office.toml", "notapolicy/readme.txt"); err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(fsys, "_shared/office.toml")
	if err != nil || string(data) != officeFragment {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if _, err := fs.Stat(fsys, "README.md"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file outside the policies root is visible: %v", err)
	}
	repo, err := policy.Load(fsys, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if names := policyNames(repo); strings.Join(names, ",") != "alpha,beta,gamma" {
		t.Errorf("policies = %v", names)
	}
}

func policyNames(r *policy.Repository) []string {
	var names []string
	for _, p := range r.Policies {
		names = append(names, p.Name)
	}
	return names
}

func TestFSHidesSymlinksAndKnowsRevisions(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	if err := os.Symlink("/etc/passwd", filepath.Join(work, "policies", "beta", "link.toml")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	head := srv.Commit(work, nil, "a symlink")
	srv.Push(work, "main")
	s := newSource(t, Config{URL: url})
	mustFetch(t, s)
	fsys, err := s.FS(head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fsys, "beta/link.toml"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a symlink is visible: %v", err)
	}
	files, err := s.Files(head)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["beta/link.toml"]; ok {
		t.Error("Files holds a symlink")
	}
	for _, bad := range []string{"", "abc", strings.Repeat("0", 40)} {
		if _, err := s.FS(bad); !errors.Is(err, ErrUnknownRevision) {
			t.Errorf("FS(%q) = %v, want ErrUnknownRevision", bad, err)
		}
	}
	other := newSource(t, Config{URL: url, Path: "missing/root"})
	mustFetch(t, other)
	if _, err := other.FS(head); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing root: %v", err)
	}
}

func TestFilesAndFilesFSRoundTrip(t *testing.T) {
	_, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	refs := mustFetch(t, s)
	files, err := s.Files(refs.Main.Hash)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name := range baseFiles() {
		if rel, ok := strings.CutPrefix(name, testRoot+"/"); ok {
			want = append(want, rel)
		}
	}
	var got []string
	for name := range files {
		got = append(got, name)
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Files = %v, want %v", got, want)
	}
	if string(files["_shared/office.toml"]) != officeFragment {
		t.Errorf("content = %q", files["_shared/office.toml"])
	}
	// What a follower loads from the raft log matches what the leader read.
	fromGit, _ := s.FS(refs.Main.Hash)
	a, errA := policy.Load(fromGit, policy.LoadOptions{})
	b, errB := policy.Load(FilesFS(files), policy.LoadOptions{})
	if errA != nil || errB != nil || len(a.Policies) != 3 || len(b.Policies) != 3 {
		t.Fatalf("load: %v %v", errA, errB)
	}
	for i := range a.Policies {
		if a.Policies[i].Etag() != b.Policies[i].Etag() {
			t.Errorf("%s: etag differs through Files", a.Policies[i].Name)
		}
	}
}

func TestFilesIsBounded(t *testing.T) {
	srv, _ := newRepo(t, gittest.Options{})
	// A local remote: 8 MiB is quicker to move without HTTP, and the
	// bound is about reading, not fetching.
	work := srv.Clone(srv.RepoPath("policies"))
	big := string(bytes.Repeat([]byte("a"), MaxFilesSize+1))
	head := srv.Commit(work, map[string]string{"policies/_traffic/big.jsonl": big}, "too much")
	srv.Push(work, "main")
	s := newSource(t, Config{URL: srv.RepoPath("policies")})
	mustFetch(t, s)
	if _, err := s.Files(head); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Files = %v, want ErrTooLarge", err)
	}
	fsys, err := s.FS(head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(fsys, "_traffic/big.jsonl"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile = %v, want ErrTooLarge", err)
	}
	// Everything else stays readable, so validation can still report.
	if _, err := policy.Load(fsys, policy.LoadOptions{}); err != nil {
		t.Errorf("Load: %v", err)
	}
}
