package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/policyrollout/reconciler/internal/gittest"
)

var commitTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// moveOn pushes a commit that changes policies and a file outside the
// policies root, and returns the commit before it and the new head.
func moveOn(t *testing.T, srv *gittest.Server, url string) (before, after string) {
	t.Helper()
	before = srv.Head("policies", "main")
	work := srv.Clone(url)
	after = srv.Commit(work, map[string]string{
		"policies/alpha/policy.toml": policyFile("deny", "", "false"),
		"policies/delta/policy.toml": policyFile("allow", "", "true"),
		"policies/beta/policy.toml":  gittest.Deleted,
		"README.md":                  "edited outside the policies\n",
	}, "a bad change")
	srv.Push(work, "main")
	return before, after
}

func TestRevertRestoresThePoliciesRoot(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{Token: testToken})
	s := newSource(t, Config{URL: url, Token: testToken})
	before, bad := moveOn(t, srv, url)
	mustFetch(t, s)
	msg := fmt.Sprintf("Revert to generation 4 (%s)", before[:12])
	h, err := s.Revert(context.Background(), RevertRequest{ToHash: before, Message: msg, AuthorName: "Ops", AuthorEmail: "ops@example.com", Now: commitTime})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Head("policies", "main"); got != h {
		t.Fatalf("remote main = %s, want the revert %s", got, h)
	}
	repo := srv.RepoPath("policies")
	if a, b := srv.Git(repo, "rev-parse", h+":policies"), srv.Git(repo, "rev-parse", before+":policies"); a != b {
		t.Errorf("policies tree %s, want %s", a, b)
	}
	if got := srv.Show("policies", h+":README.md"); got != "edited outside the policies" {
		t.Errorf("a file outside the policies root changed: %q", got)
	}
	meta := srv.Git(repo, "log", "-1", "--format=%P|%an|%ae|%at|%B", h)
	want := fmt.Sprintf("%s|Ops|ops@example.com|%d|%s", bad, commitTime.Unix(), msg)
	if meta != want {
		t.Errorf("commit = %q, want %q", meta, want)
	}
	if refs := mustFetch(t, s); refs.Main.Hash != h {
		t.Errorf("Fetch after the revert: %v", refs.Main)
	}
	if m, err := s.CommitMeta(h); err != nil || m != (CommitMeta{AuthorName: "Ops", AuthorEmail: "ops@example.com", Message: msg}) {
		t.Errorf("CommitMeta = %+v, %v; want Ops, ops@example.com, %q", m, err, msg)
	}
	// Reverting again changes nothing.
	again, err := s.Revert(context.Background(), RevertRequest{ToHash: before, Message: msg})
	if !errors.Is(err, ErrNoChange) || again != h {
		t.Errorf("second revert = %s, %v; want %s, ErrNoChange", again, err, h)
	}
}

func TestRevertWholeRepositoryOverLocalPath(t *testing.T) {
	srv, _ := newRepo(t, gittest.Options{})
	path := srv.RepoPath("policies")
	before, _ := moveOn(t, srv, path)
	s := newSource(t, Config{URL: path, Path: "."})
	mustFetch(t, s)
	h, err := s.Revert(context.Background(), RevertRequest{ToHash: before, Message: "Revert"})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := srv.Git(path, "rev-parse", h+"^{tree}"), srv.Git(path, "rev-parse", before+"^{tree}"); a != b {
		t.Errorf("tree %s, want %s", a, b)
	}
}

func TestRevertRefusedByProtectedBranch(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	before, bad := moveOn(t, srv, url)
	s := newSource(t, Config{URL: url})
	srv.RejectPushes("policies", "main", true)
	_, err := s.Revert(context.Background(), RevertRequest{ToHash: before, Message: "Revert"})
	var refused *PushRefusedError
	if !errors.Is(err, ErrPushRefused) || !errors.As(err, &refused) || refused.Stale {
		t.Fatalf("err = %v, want a PushRefusedError", err)
	}
	if !strings.Contains(refused.Message, gittest.RejectMessage) || refused.Ref != "refs/heads/main" {
		t.Errorf("refusal = %+v; want the remote's message", refused)
	}
	if got := srv.Head("policies", "main"); got != bad {
		t.Errorf("main moved to %s", got)
	}
	// The refused commit can still be proposed on a branch.
	if err := s.PushBranch(context.Background(), refused.Commit, "reconciler/revert"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Head("policies", "reconciler/revert"); got != refused.Commit {
		t.Errorf("branch at %s, want %s", got, refused.Commit)
	}
}

func TestPushWithoutWritePermission(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	before, _ := moveOn(t, srv, url)
	srv.DisableReceivePack("policies")
	s := newSource(t, Config{URL: url})
	_, err := s.Revert(context.Background(), RevertRequest{ToHash: before, Message: "Revert"})
	if !errors.Is(err, ErrPushRefused) {
		t.Fatalf("err = %v, want ErrPushRefused", err)
	}
}

func TestCommitPolicyReplacesOneDirectory(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	start := srv.Head("policies", "main")
	newAlpha := map[string][]byte{
		"policy.toml":  []byte(policyFile("allow", "", "request.path == '/x'")),
		"tests/t.toml": []byte("[[tests]]\nname = \"t\"\nrequest = { path = \"/x\" }\nexpect = \"deny\"\n"),
	}
	h, err := s.CommitPolicy(context.Background(), CommitPolicyRequest{Policy: "alpha", Files: newAlpha, Message: "Commit experiment pr-7 of alpha", Now: commitTime})
	if err != nil {
		t.Fatal(err)
	}
	repo := srv.RepoPath("policies")
	if got := srv.Git(repo, "ls-tree", "-r", "--name-only", h, "policies/alpha"); got != "policies/alpha/policy.toml\npolicies/alpha/tests/t.toml" {
		t.Errorf("alpha now holds %q", got)
	}
	if got := srv.Git(repo, "diff", "--name-only", start, h); got != "policies/alpha/policy.toml\npolicies/alpha/tests/t.toml" {
		t.Errorf("the commit touched %q", got)
	}
	files, err := s.Files(h)
	if err != nil || string(files["alpha/policy.toml"]) != string(newAlpha["policy.toml"]) {
		t.Errorf("Files = %v, %v", files["alpha/policy.toml"], err)
	}
	// An empty directory deletes the policy.
	h2, err := s.CommitPolicy(context.Background(), CommitPolicyRequest{Policy: "beta", Message: "Delete beta"})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Git(repo, "diff", "--name-only", h, h2); got != "policies/beta/policy.toml" {
		t.Errorf("the delete touched %q", got)
	}
	for _, bad := range []CommitPolicyRequest{
		{Policy: "_shared", Message: "m", Files: newAlpha},
		{Policy: "../x", Message: "m", Files: newAlpha},
		{Policy: "alpha", Message: "m", Files: map[string][]byte{"../escape.toml": nil}},
		{Policy: "alpha", Message: "m", Files: map[string][]byte{"a": nil, "a/b": nil}},
	} {
		if _, err := s.CommitPolicy(context.Background(), bad); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
}

func TestPushErrorClassification(t *testing.T) {
	s := newSource(t, Config{URL: "https://example.com/o/r.git", Token: testToken})
	ctx := context.Background()
	main := plumbing.NewBranchReferenceName("main")
	for _, tc := range []struct {
		err   error
		stale bool
		kind  error
	}{
		{errors.New("non-fast-forward update: refs/heads/main"), true, ErrPushRefused},
		{errors.New("remote ref refs/heads/main required to be a but is b"), true, ErrPushRefused},
		{errors.New("command error on refs/heads/main: pre-receive hook declined"), false, ErrPushRefused},
		{fmt.Errorf("%w: 403 for "+testToken, transport.ErrAuthorizationFailed), false, ErrPushRefused},
		{io.ErrUnexpectedEOF, false, ErrPush},
	} {
		err := s.cfg.pushError(ctx, main, plumbing.ZeroHash, tc.err, "remote: hello\n")
		if !errors.Is(err, tc.kind) {
			t.Errorf("%v: classified as %v", tc.err, err)
		}
		var r *PushRefusedError
		if errors.As(err, &r) && r.Stale != tc.stale {
			t.Errorf("%v: stale = %v", tc.err, r.Stale)
		}
		if strings.Contains(err.Error(), testToken) {
			t.Errorf("token leaked: %v", err)
		}
	}
}

// With Edit, a commit writes only the files whose content the edit
// changed (issue 24): the directory's other entries keep their blobs and
// modes, an executable and a symlink included, which Files never reads.
func TestCommitPolicyEditWritesOnlyWhatChanged(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	dir := filepath.Join(work, "policies", "alpha")
	if err := os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("policy.toml", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	srv.Git(work, "add", "-A")
	srv.Git(work, "commit", "-q", "-m", "alpha: a script and a link")
	srv.Push(work, "main")
	start := srv.Head("policies", "main")

	s := newSource(t, Config{URL: url})
	edit := func(root map[string][]byte) (map[string][]byte, error) {
		if _, ok := root["alpha/check.sh"]; !ok {
			t.Errorf("the edit was not given main's files: %v", slices.Sorted(maps.Keys(root)))
		}
		return map[string][]byte{
			"policy.toml": []byte(policyFile("deny", "../_shared/office.toml", "request.method == 'PUT'")),
			"check.sh":    root["alpha/check.sh"],
		}, nil
	}
	h, err := s.CommitPolicy(context.Background(), CommitPolicyRequest{Policy: "alpha", Edit: edit, Message: "edit alpha", Now: commitTime})
	if err != nil {
		t.Fatal(err)
	}
	repo := srv.RepoPath("policies")
	if got := srv.Git(repo, "diff", "--name-status", start, h); got != "M\tpolicies/alpha/policy.toml\nD\tpolicies/alpha/tests/t.toml" {
		t.Errorf("the commit changed\n%s", got)
	}
	if got := srv.Git(repo, "ls-tree", h, "policies/alpha/"); !strings.Contains(got, "100755 blob") || !strings.Contains(got, "120000 blob") {
		t.Errorf("alpha holds\n%s", got)
	}
}
