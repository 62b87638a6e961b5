// Package gittest runs a real git server inside a test: bare repositories
// served over smart HTTP by the git CLI's own `git http-backend` behind
// net/http/cgi on 127.0.0.1, with an optional token check and switches that
// make the remote slow, stopped or refusing pushes. Helpers drive the git CLI
// the way a user would (clone, commit, push), so code under test meets the
// same protocol it meets in production rather than a fake.
//
// Every git command runs with GIT_CONFIG_GLOBAL=/dev/null and
// GIT_CONFIG_NOSYSTEM=1, so the developer's own configuration never leaks in.
package gittest

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// TokenUser is the user name that goes with a token in basic auth, as
// GitHub expects for installation and personal access tokens.
const TokenUser = "x-access-token"

// Options configure a Server.
type Options struct {
	// Token, when set, is required as the basic-auth password of every
	// request (any user name); requests without it, or with another, get 401.
	Token string
}

// Server is a smart-HTTP git server over the bare repositories in Root().
type Server struct {
	t       testing.TB
	opts    Options
	root    string
	backend string
	handler http.Handler

	slow     atomic.Int64 // nanoseconds each request waits before it is served
	requests atomic.Int64
	sent     atomic.Int64 // response body bytes, all requests

	mu   sync.Mutex
	addr string
	srv  *http.Server
}

// NewServer starts a server on 127.0.0.1 that the test's cleanup stops.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, root: t.TempDir(), backend: httpBackend(t)}
	s.handler = &cgi.Handler{
		Path: s.backend,
		Root: "/",
		Env: append([]string{
			"GIT_PROJECT_ROOT=" + s.root,
			"GIT_HTTP_EXPORT_ALL=1",
		}, hermeticEnv()...),
		InheritEnv: []string{"PATH"},
		Stderr:     testlog.Writer(t, "git-http-backend: "),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("gittest: listen: %v", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.Down)
	return s
}

// httpBackend finds git-http-backend in the git CLI's exec path.
func httpBackend(t testing.TB) string {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("gittest: the git CLI is needed: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("gittest: git-http-backend not found: %v", err)
	}
	return p
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	s.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if d := time.Duration(s.slow.Load()); d > 0 {
		// Waiting on the request context means a client that gives up
		// also frees this goroutine, as a real server would.
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	if s.opts.Token != "" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	s.handler.ServeHTTP(countingWriter{w, &s.sent}, r)
}

// countingWriter counts what a response writes (BytesSent).
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// BytesSent is how many response body bytes the server has written: what
// a fetch downloaded, measured on the wire side.
func (s *Server) BytesSent() int64 { return s.sent.Load() }

func (s *Server) authorized(r *http.Request) bool {
	_, pass, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Token)) == 1
}

// Root is the directory holding the bare repositories, one per name.
func (s *Server) Root() string { return s.root }

// RepoPath is the bare repository directory of name.
func (s *Server) RepoPath(name string) string { return filepath.Join(s.root, name+".git") }

// URL is the clone URL of the repository name, without credentials.
func (s *Server) URL(name string) string { return "http://" + s.addr + "/" + name + ".git" }

// Requests counts the HTTP requests served (or refused) so far.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Slow makes every later request wait d before it is served; 0 restores.
func (s *Server) Slow(d time.Duration) { s.slow.Store(int64(d)) }

// Down stops the server: its port refuses connections and open ones are
// closed, as when the remote host goes away.
func (s *Server) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// Up starts a stopped server again on the same address.
func (s *Server) Up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment after Close
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("gittest: listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// hermeticEnv is the environment every git command gets on top of the
// inherited one, so that tests never read the user's or system's config.
func hermeticEnv() []string {
	return []string{
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Test User",
		"GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test User",
		"GIT_COMMITTER_EMAIL=test@example.com",
	}
}

// errExit wraps a failed git command with its output.
func errExit(args []string, out []byte, err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
}
