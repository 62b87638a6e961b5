package gittest

import (
	"strings"
	"testing"
	"time"
)

func TestCloneCommitPushOverHTTP(t *testing.T) {
	s := NewServer(t, Options{Token: "s3cret"})
	url := s.InitRepo("policies", map[string]string{"a/policy.toml": "x = 1\n"})
	dir := s.Clone(url)
	hash := s.Commit(dir, map[string]string{"a/policy.toml": "x = 2\n", "b.txt": "b"}, "edit")
	s.Push(dir, "main")
	if got := s.Head("policies", "main"); got != hash {
		t.Fatalf("main = %s, want %s", got, hash)
	}
	if got := s.Show("policies", "main:a/policy.toml"); got != "x = 2" {
		t.Fatalf("content = %q", got)
	}
	s.Commit(dir, map[string]string{"b.txt": Deleted}, "delete")
	s.Push(dir, "main")
	if _, err := s.TryGit(s.RepoPath("policies"), "show", "main:b.txt"); err == nil {
		t.Fatal("b.txt still there")
	}
}

func TestWrongTokenIsRefused(t *testing.T) {
	s := NewServer(t, Options{Token: "right"})
	url := s.InitRepo("r", map[string]string{"f": "1"})
	bad := strings.Replace(url, "http://", "http://x-access-token:wrong@", 1)
	_, err := s.TryGit("", "ls-remote", bad)
	if err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("ls-remote with a wrong token: %v", err)
	}
}

func TestRejectPushes(t *testing.T) {
	s := NewServer(t, Options{})
	url := s.InitRepo("r", map[string]string{"f": "1"})
	dir := s.Clone(url)
	s.Commit(dir, map[string]string{"f": "2"}, "two")
	s.RejectPushes("r", "main", true)
	err := s.TryPush(dir, "main")
	if err == nil || !strings.Contains(err.Error(), RejectMessage) {
		t.Fatalf("push to a protected main: %v", err)
	}
	s.RejectPushes("r", "main", false)
	s.Push(dir, "main")
}

func TestDownUpSlow(t *testing.T) {
	s := NewServer(t, Options{})
	url := s.InitRepo("r", map[string]string{"f": "1"})
	s.Down()
	if _, err := s.TryGit("", "ls-remote", url); err == nil {
		t.Fatal("ls-remote against a stopped server worked")
	}
	s.Up()
	s.Git("", "ls-remote", url)
	s.Slow(300 * time.Millisecond)
	start := time.Now()
	s.Git("", "ls-remote", url)
	if time.Since(start) < 300*time.Millisecond {
		t.Fatal("Slow had no effect")
	}
}

func TestSetRef(t *testing.T) {
	s := NewServer(t, Options{})
	url := s.InitRepo("r", map[string]string{"f": "1"})
	dir := s.Clone(url)
	s.CreateBranch(dir, "feature")
	h := s.Commit(dir, map[string]string{"f": "2"}, "two")
	s.Push(dir, "feature")
	s.SetRef("r", "refs/pull/7/head", h)
	out := s.Git("", "ls-remote", url)
	if !strings.Contains(out, h+"\trefs/pull/7/head") || !strings.Contains(out, "refs/heads/feature") {
		t.Fatalf("ls-remote:\n%s", out)
	}
}
