package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Deleted, as the content of a file given to Commit, deletes that file.
const Deleted = "\x00gittest:deleted\x00"

// DefaultBranch is the branch InitRepo creates.
const DefaultBranch = "main"

// Git runs the git CLI in dir (any directory when dir is "") with the
// hermetic environment and returns its trimmed output; failure ends the test.
func (s *Server) Git(dir string, args ...string) string {
	s.t.Helper()
	out, err := s.TryGit(dir, args...)
	if err != nil {
		s.t.Fatalf("gittest: %v", err)
	}
	return out
}

// TryGit is Git for commands expected to fail: it returns the error, which
// holds git's output.
func (s *Server) TryGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), hermeticEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", errExit(args, out, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// InitRepo creates the bare repository name, accepting pushes over HTTP, with
// one commit of files on main (none when files is empty), and returns its URL.
func (s *Server) InitRepo(name string, files map[string]string) string {
	s.t.Helper()
	bare := s.RepoPath(name)
	s.Git("", "init", "-q", "--bare", "-b", DefaultBranch, bare)
	s.Git(bare, "config", "http.receivepack", "true")
	if len(files) > 0 {
		work := s.t.TempDir()
		s.Git(work, "init", "-q", "-b", DefaultBranch)
		s.Commit(work, files, "initial")
		s.Git(work, "push", "-q", bare, DefaultBranch)
	}
	return s.URL(name)
}

// Clone clones url (one of this server's, or a local path) into a new
// temporary directory, with the server's token when it has one, and
// returns the directory.
func (s *Server) Clone(url string) string {
	s.t.Helper()
	dir := filepath.Join(s.t.TempDir(), "clone")
	s.Git("", "clone", "-q", s.withToken(url), dir)
	return dir
}

// withToken puts the server's token into a URL of this server, as a user's
// credential helper would.
func (s *Server) withToken(url string) string {
	prefix := "http://" + s.addr + "/"
	if s.opts.Token == "" || !strings.HasPrefix(url, prefix) {
		return url
	}
	return "http://" + TokenUser + ":" + s.opts.Token + "@" + s.addr + "/" + strings.TrimPrefix(url, prefix)
}

// Commit writes files into the work tree dir (content Deleted removes a
// file), commits everything with msg and returns the new commit's hash.
func (s *Server) Commit(dir string, files map[string]string, msg string) string {
	s.t.Helper()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if files[name] == Deleted {
			if err := os.RemoveAll(p); err != nil {
				s.t.Fatalf("gittest: %v", err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			s.t.Fatalf("gittest: %v", err)
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			s.t.Fatalf("gittest: %v", err)
		}
	}
	s.Git(dir, "add", "-A")
	s.Git(dir, "commit", "-q", "--allow-empty", "-m", msg)
	return s.Git(dir, "rev-parse", "HEAD")
}

// Push pushes ref (a branch, or any refspec) from the clone dir to origin.
func (s *Server) Push(dir, ref string) {
	s.t.Helper()
	s.Git(dir, "push", "-q", "origin", ref)
}

// TryPush is Push for pushes expected to fail.
func (s *Server) TryPush(dir, ref string) error {
	_, err := s.TryGit(dir, "push", "-q", "origin", ref)
	return err
}

// Pull brings the clone dir's current branch up to date with origin.
func (s *Server) Pull(dir string) {
	s.t.Helper()
	s.Git(dir, "pull", "-q", "--ff-only")
}

// CreateBranch creates branch name at the clone's HEAD and checks it out.
func (s *Server) CreateBranch(dir, name string) {
	s.t.Helper()
	s.Git(dir, "checkout", "-q", "-b", name)
}

// Checkout checks out an existing branch in the clone dir.
func (s *Server) Checkout(dir, name string) {
	s.t.Helper()
	s.Git(dir, "checkout", "-q", name)
}

// SetRef points ref in the bare repository repo at hash, as GitHub does for
// refs/pull/N/head when a pull request is opened or updated.
func (s *Server) SetRef(repo, ref, hash string) {
	s.t.Helper()
	s.Git(s.RepoPath(repo), "update-ref", ref, hash)
}

// DeleteRef removes ref from the bare repository repo.
func (s *Server) DeleteRef(repo, ref string) {
	s.t.Helper()
	s.Git(s.RepoPath(repo), "update-ref", "-d", ref)
}

// Head is the hash branch points at in the bare repository repo.
func (s *Server) Head(repo, branch string) string {
	s.t.Helper()
	return s.Git(s.RepoPath(repo), "rev-parse", "refs/heads/"+branch)
}

// Show is `git show rev` in the bare repository repo; "main:a/b.toml" gives
// that file's content at main.
func (s *Server) Show(repo, rev string) string {
	s.t.Helper()
	return s.Git(s.RepoPath(repo), "show", rev)
}

// RejectMessage is what the server says when it refuses a push to a
// protected branch; it echoes GitHub's wording.
const RejectMessage = "GH006: Protected branch update failed"

// RejectPushes makes the bare repository repo refuse (on) or accept (off)
// pushes to branch, with a pre-receive hook that prints RejectMessage, as a
// protected branch does.
func (s *Server) RejectPushes(repo, branch string, on bool) {
	s.t.Helper()
	hook := filepath.Join(s.RepoPath(repo), "hooks", "pre-receive")
	if !on {
		if err := os.Remove(hook); err != nil && !os.IsNotExist(err) {
			s.t.Fatalf("gittest: %v", err)
		}
		return
	}
	script := "#!/bin/sh\n" +
		"while read old new ref; do\n" +
		"  if [ \"$ref\" = \"refs/heads/" + branch + "\" ]; then\n" +
		"    echo \"" + RejectMessage + " for refs/heads/" + branch + ".\" >&2\n" +
		"    exit 1\n" +
		"  fi\n" +
		"done\n"
	if err := os.MkdirAll(filepath.Dir(hook), 0o755); err != nil {
		s.t.Fatalf("gittest: %v", err)
	}
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		s.t.Fatalf("gittest: %v", err)
	}
}

// DisableReceivePack makes the repository refuse every push over HTTP with
// 403, as a token without write permission does.
func (s *Server) DisableReceivePack(repo string) {
	s.t.Helper()
	s.Git(s.RepoPath(repo), "config", "http.receivepack", "false")
}
