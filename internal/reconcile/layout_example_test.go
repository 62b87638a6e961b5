package reconcile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// exampleFiles is policies.example as a tree.
func exampleFiles(t testing.TB) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..", "policies.example")
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// newExampleRepo serves policies.example from a git server to a loop.
func newExampleRepo(t *testing.T) *gitRepo {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{Token: testToken})
	url := srv.InitRepo("policies", exampleFiles(t))
	src, err := OpenGit(context.Background(), gitsource.Config{URL: url, Token: testToken, Path: ".",
		Dir: filepath.Join(t.TempDir(), "git"), Timeout: 20 * time.Second, Logger: testlog.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := &gitRepo{srv: srv, src: src, store: newFakeStore()}
	r.loop = startLoop(t, r.store, src, fixedMembers{})
	eventually(t, "generation 1 active", func() bool { return r.store.State().Active == 1 })
	return r
}

// livePolicy is pol as the active generation holds it.
func (r *gitRepo) livePolicy(t *testing.T, pol string) *policy.Policy {
	t.Helper()
	g, ok := r.store.State().ActiveGeneration()
	if !ok {
		t.Fatal("no active generation")
	}
	p, err := policy.LoadPolicy(policy.TreeFS(g.Files), pol, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// commitAPI commits p as an API experiment and waits for its generation;
// it returns main's heads before and after.
func (r *gitRepo) commitAPI(t *testing.T, p *policy.Policy) (before, after string, err error) {
	t.Helper()
	before = r.srv.Head("policies", "main")
	e := &preview.Experiment{Name: preview.ResourceName(p.Name, "e2"), Etag: p.Etag(), Policy: p,
		Source: preview.Source{Kind: preview.SourceAPI}}
	commit, err := r.loop.Committer().CommitToMain(context.Background(), e, "commit "+e.Name)
	if err != nil {
		return before, r.srv.Head("policies", "main"), err
	}
	r.loop.Trigger()
	eventually(t, "the commit's generation active", func() bool {
		g, ok := r.store.State().ActiveGeneration()
		return ok && g.Commit == commit
	})
	return before, r.srv.Head("policies", "main"), nil
}

// changedLines is the diff's -/+ lines between two commits, without the
// file headers.
func (r *gitRepo) changedLines(before, after string) []string {
	var out []string
	for _, l := range strings.Split(r.srv.Git(r.srv.RepoPath("policies"), "diff", "-U0", before, after), "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
			out = append(out, l)
		}
	}
	return out
}

func (r *gitRepo) diffNames(before, after string) string {
	return r.srv.Git(r.srv.RepoPath("policies"), "diff", "--name-only", before, after)
}

// Issue 24, finding 1: an API commit of each example policy keeps its
// includes, fragments, comments and test files byte for byte. Unchanged,
// it is no commit at all; a one-rule change touches only the file that
// defines the rule, and only the rule's lines; a new rule is appended to
// policy.toml and nothing else moves.
func TestAPICommitOfEveryExamplePolicyKeepsItsFiles(t *testing.T) {
	r := newExampleRepo(t)
	for _, pol := range []string{"admin-api", "edge-firewall"} {
		// Unchanged: nothing to commit, main stays where it is.
		before, after, err := r.commitAPI(t, r.livePolicy(t, pol))
		if !errors.Is(err, gitsource.ErrNoChange) || after != before {
			t.Fatalf("%s unchanged: err %v, main %s → %s: %s", pol, err, before, after, r.diffNames(before, after))
		}

		// A rule of each of the policy's own files, changed: that file
		// alone changes, and only in that rule's match.
		live := r.livePolicy(t, pol)
		seen := map[string]bool{}
		for _, rule := range live.Rules {
			file := rule.Pos.File
			if seen[file] || !strings.HasPrefix(file, pol+"/") {
				continue
			}
			seen[file] = true
			p := r.livePolicy(t, pol)
			for i := range p.Rules {
				if p.Rules[i].Name == rule.Name {
					p.Rules[i].Match = strings.TrimSpace(p.Rules[i].Match) + " && true"
				}
			}
			before, after, err := r.commitAPI(t, p)
			if err != nil {
				t.Fatalf("%s: changing %s of %s: %v", pol, rule.Name, file, err)
			}
			if got := r.diffNames(before, after); got != file {
				t.Errorf("%s: changing %s of %s changed %q", pol, rule.Name, file, got)
			}
			// The match's last line, and nothing else.
			if lines := r.changedLines(before, after); len(lines) != 2 || !strings.HasSuffix(lines[1], " && true") ||
				lines[1] != "+"+lines[0][1:]+" && true" {
				t.Errorf("%s: changing the match of %s changed %q", pol, rule.Name, lines)
			}
			t.Logf("%s: %s of %s: %q", pol, rule.Name, file, r.changedLines(before, after))
		}
		if len(seen) < 2 {
			t.Errorf("%s: rules in %d files of its own, want policy.toml and a fragment", pol, len(seen))
		}

		// One rule appended: added to policy.toml, nothing removed.
		p := r.livePolicy(t, pol)
		p.Rules = append(p.Rules, policy.Rule{Name: "deny-e2", Priority: 90, Action: policy.ActionDeny,
			Match: "request.path == '/e2'", Description: "Added through the API."})
		before, after, err = r.commitAPI(t, p)
		if err != nil {
			t.Fatalf("%s: appending a rule: %v", pol, err)
		}
		if got := r.diffNames(before, after); got != pol+"/policy.toml" {
			t.Errorf("%s: appending a rule changed %q", pol, got)
		}
		added := strings.Join(r.changedLines(before, after), "\n")
		if want := "+\n+[[rules]]\n+name = \"deny-e2\"\n+priority = 90\n+action = \"deny\"\n" +
			"+description = \"Added through the API.\"\n+match = '''\n+request.path == '/e2'\n+'''"; added != want {
			t.Errorf("%s: appending a rule changed\n%s\nwant\n%s", pol, added, want)
		}
		if got := r.srv.Show("policies", "main:"+pol+"/policy.toml"); !strings.Contains(got, `include = ["../_shared/office.toml"]`) {
			t.Errorf("%s/policy.toml lost its include:\n%s", pol, got)
		}
	}
}

// Issue 24: the validation of an API experiment that fails a test names
// the test file people edit, at the test's line, and counts the tests.
func TestAPIExperimentValidationNamesTheTestFile(t *testing.T) {
	r := newExampleRepo(t)
	p := r.livePolicy(t, "admin-api")
	for i := range p.Rules {
		if p.Rules[i].Name == "deny-auditor-writes" {
			p.Rules[i].Action = policy.ActionAllow
		}
	}
	e := r.loop.Committer().WithValidation(&preview.Experiment{Name: preview.ResourceName("admin-api", "e2"), Etag: p.Etag(),
		Policy: p, Source: preview.Source{Kind: preview.SourceAPI}})
	v := e.Validation
	if v == nil || v.Valid || v.Tests == nil || v.Tests.Passed >= v.Tests.Total || v.Tests.Total != len(p.Tests) {
		t.Fatalf("validation %+v", v)
	}
	want := `admin-api/tests/grants.toml:3: test "auditor who is also SRE cannot write"`
	if !strings.HasPrefix(v.Errors[0], want) {
		t.Errorf("first error %q, want it to start with %q", v.Errors[0], want)
	}
	t.Logf("%d of %d tests pass; %q", v.Tests.Passed, v.Tests.Total, v.Errors)
}
