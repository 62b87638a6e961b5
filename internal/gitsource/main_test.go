package gitsource

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

// TestMain keeps every git process the tests start (go-git runs
// git-upload-pack and git-receive-pack for local remotes) away from the
// developer's configuration.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == RepackCommand {
		os.Exit(repackWorker(os.Args[2]))
	}
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// The policies root in the test repositories is "policies", so that tests
// see files outside it stay untouched.
const testRoot = "policies"

const officeFragment = `[[rules]]
name = "allow-office"
priority = 100
action = "allow"
match = "request.source_ip == '192.0.2.1'"
`

func policyFile(defaultAction, include, ruleMatch string) string {
	s := "default_action = \"" + defaultAction + "\"\n"
	if include != "" {
		s += "include = [\"" + include + "\"]\n"
	}
	return s + "\n[[rules]]\nname = \"r1\"\npriority = 200\naction = \"deny\"\nmatch = \"" + ruleMatch + "\"\n"
}

// baseFiles is a small repository: three policies, two of which include
// the shared fragment, and a file outside the policies root.
func baseFiles() map[string]string {
	return map[string]string{
		"README.md":                      "policy repository\n",
		"policies/_shared/office.toml":   officeFragment,
		"policies/alpha/policy.toml":     policyFile("deny", "../_shared/office.toml", "request.method == 'DELETE'"),
		"policies/alpha/tests/t.toml":    "[[tests]]\nname = \"t1\"\nrequest = { method = \"GET\" }\nexpect = \"deny\"\n",
		"policies/beta/policy.toml":      policyFile("allow", "", "request.path == '/admin'"),
		"policies/gamma/policy.toml":     policyFile("deny", "../_shared/office.toml", "request.host == 'x'"),
		"policies/notapolicy/readme.txt": "no policy.toml here\n",
	}
}

// newSource opens a clone of url in a temporary directory.
func newSource(t testing.TB, cfg Config) *Source {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "clone.git")
	}
	if cfg.Path == "" {
		cfg.Path = testRoot
	}
	if cfg.Timeout == 0 {
		// Not what these tests check (the deadline tests set their own):
		// with the race detector on a loaded 2-core machine, the fetch of
		// a 10 MB list took over 10 s and failed the test.
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t)
	}
	if cfg.Repack.Path == "" {
		cfg.Repack.Path = testBinary(t) // housekeeping packs in a child, as a node does
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func mustFetch(t testing.TB, s *Source) *Refs {
	t.Helper()
	refs, err := s.Fetch(context.Background())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return refs
}

// newRepo starts a server with one repository of baseFiles and returns the
// server and the repository's URL.
func newRepo(t testing.TB, opts gittest.Options) (*gittest.Server, string) {
	t.Helper()
	srv := gittest.NewServer(t, opts)
	return srv, srv.InitRepo("policies", baseFiles())
}
