package gitsource

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// staleBranch makes the history of issue 14's fourth failure: a branch
// "stale" that changes alpha, then main changes beta after the branch
// forked. It returns the fork point, the branch head and main's head.
func staleBranch(t *testing.T, srv *gittest.Server, url string) (fork, branch, main string) {
	t.Helper()
	work := srv.Clone(url)
	fork = srv.Head("policies", "main")
	srv.CreateBranch(work, "stale")
	branch = srv.Commit(work, map[string]string{"policies/alpha/policy.toml": policyFile("allow", "", "false")}, "alpha on a branch")
	srv.Push(work, "stale")
	srv.Checkout(work, "main")
	main = srv.Commit(work, map[string]string{"policies/beta/policy.toml": policyFile("deny", "", "true")}, "beta on main")
	srv.Push(work, "main")
	return fork, branch, main
}

func TestMergeBaseAndIsAncestorAgreeWithGit(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	fork, branch, main := staleBranch(t, srv, url)
	mustFetch(t, s)
	base, err := s.MergeBase(main, branch)
	if err != nil {
		t.Fatal(err)
	}
	if want := srv.Git(srv.RepoPath("policies"), "merge-base", main, branch); base != want || base != fork {
		t.Fatalf("merge base = %s, git says %s (fork %s)", base, want, fork)
	}
	for _, c := range []struct {
		a, d string
		want bool
	}{{fork, main, true}, {fork, branch, true}, {main, main, true}, {branch, main, false}, {main, fork, false}} {
		got, err := s.IsAncestor(c.a, c.d)
		if err != nil || got != c.want {
			t.Errorf("IsAncestor(%.7s, %.7s) = %v, %v; want %v", c.a, c.d, got, err, c.want)
		}
	}
	if _, err := s.IsAncestor(fork, strings.Repeat("ab", 20)); !errors.Is(err, ErrUnknownRevision) {
		t.Errorf("unknown commit: %v", err)
	}
}

func TestMergePoliciesKeepsMainsNewerChanges(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	fork, branch, main := staleBranch(t, srv, url)
	mustFetch(t, s)
	m, err := s.MergePolicies(main, branch)
	if err != nil || len(m.Conflicts) > 0 || m.Base != fork || m.Merged {
		t.Fatalf("merge = %+v, %v", m, err)
	}
	if got, want := string(m.Files["alpha/policy.toml"]), policyFile("allow", "", "false"); got != want {
		t.Errorf("alpha is not the branch's:\n%s", got)
	}
	if got, want := string(m.Files["beta/policy.toml"]), policyFile("deny", "", "true"); got != want {
		t.Errorf("beta lost main's newer change:\n%s", got)
	}
	mainFiles, _ := s.Files(main)
	changed, err := ChangedPoliciesFS(FilesFS(mainFiles), FilesFS(m.Files), s.cfg.LoadOptions)
	if err != nil || len(changed) != 1 || changed[0] != "alpha" {
		t.Errorf("the merge changes %v (%v), want only alpha", changed, err)
	}
	m, err = s.MergePolicies(main, fork)
	if err != nil || !m.Merged {
		t.Errorf("merging an ancestor: %+v %v", m, err)
	}
}

func TestMergePoliciesReportsConflicts(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	_, branch, _ := staleBranch(t, srv, url)
	work := srv.Clone(url)
	main := srv.Commit(work, map[string]string{"policies/alpha/policy.toml": policyFile("deny", "", "true")}, "alpha on main")
	srv.Push(work, "main")
	mustFetch(t, s)
	m, err := s.MergePolicies(main, branch)
	if err != nil || m.Files != nil || len(m.Conflicts) != 1 || m.Conflicts[0] != "alpha/policy.toml" {
		t.Fatalf("merge = %+v, %v", m, err)
	}
	_, err = s.CommitMerge(context.Background(), MergeRequest{Source: branch, Message: "merge"})
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "alpha/policy.toml") {
		t.Fatalf("CommitMerge: %v", err)
	}
	if got := srv.Head("policies", "main"); got != main {
		t.Errorf("main moved to %s on a conflict", got)
	}
}

func TestCommitMergeWritesAMergeCommit(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	_, branch, main := staleBranch(t, srv, url)
	mustFetch(t, s)
	var checked map[string][]byte
	h, err := s.CommitMerge(context.Background(), MergeRequest{Source: branch, Message: "Merge stale", Now: commitTime,
		Check: func(files map[string][]byte) error { checked = files; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	repo := srv.RepoPath("policies")
	if got := srv.Head("policies", "main"); got != h {
		t.Fatalf("main = %s, want the merge %s", got, h)
	}
	if got := srv.Git(repo, "log", "-1", "--format=%P", h); got != main+" "+branch {
		t.Errorf("parents = %s, want main then the branch", got)
	}
	if got := srv.Git(repo, "diff", "--name-only", main, h); got != "policies/alpha/policy.toml" {
		t.Errorf("the merge changes %q, want only alpha", got)
	}
	if string(checked["beta/policy.toml"]) != policyFile("deny", "", "true") || len(checked) == 0 {
		t.Errorf("Check saw another tree: %v", checked)
	}
	if _, err := s.CommitMerge(context.Background(), MergeRequest{Source: branch, Message: "again"}); !errors.Is(err, ErrNoChange) {
		t.Errorf("a second merge: %v", err)
	}
}

func TestCheckFailurePushesNothing(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	_, branch, main := staleBranch(t, srv, url)
	mustFetch(t, s)
	no := errors.New("policy tests fail")
	_, err := s.CommitMerge(context.Background(), MergeRequest{Source: branch, Message: "m",
		Check: func(map[string][]byte) error { return no }})
	if !errors.Is(err, no) {
		t.Fatalf("CommitMerge: %v", err)
	}
	_, err = s.CommitPolicy(context.Background(), CommitPolicyRequest{Policy: "alpha", Message: "c",
		Files: map[string][]byte{"policy.toml": []byte(policyFile("allow", "", "true"))},
		Check: func(map[string][]byte) error { return no }})
	if !errors.Is(err, no) {
		t.Fatalf("CommitPolicy: %v", err)
	}
	if got := srv.Head("policies", "main"); got != main {
		t.Errorf("main moved to %s although the check failed", got)
	}
}

// FuzzThreeWay checks ThreeWay against its definition on small random
// file sets: a side that did not change a path never wins over one that
// did, agreeing sides never conflict, and swapping the sides changes
// neither the conflicts nor (without conflicts) the result.
func FuzzThreeWay(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{9, 9, 9, 1, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		var sides [3]map[string]byte
		for i := range sides {
			sides[i] = map[string]byte{}
		}
		for i, b := range data {
			if v := b >> 4; v != 0 { // 0: absent
				sides[i%3][string(rune('a'+int(b&7)))] = v & 3
			}
		}
		base, ours, theirs := sides[0], sides[1], sides[2]
		out, conflicts := ThreeWay(base, ours, theirs)
		back, conflicts2 := ThreeWay(base, theirs, ours)
		if strings.Join(conflicts, ",") != strings.Join(conflicts2, ",") {
			t.Fatalf("conflicts depend on the order: %v vs %v", conflicts, conflicts2)
		}
		bad := map[string]bool{}
		for _, p := range conflicts {
			bad[p] = true
		}
		for _, p := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			b, inB := base[p]
			o, inO := ours[p]
			th, inT := theirs[p]
			r, inR := out[p]
			oChanged, tChanged := inO != inB || o != b, inT != inB || th != b
			agree := inO == inT && o == th
			switch {
			case bad[p]:
				if agree || !oChanged || !tChanged {
					t.Fatalf("%s: conflict without cause: base %v/%v ours %v/%v theirs %v/%v", p, b, inB, o, inO, th, inT)
				}
			case tChanged && !agree:
				if inR != inT || r != th {
					t.Fatalf("%s: theirs changed it, result %v/%v", p, r, inR)
				}
			default:
				if inR != inO || r != o {
					t.Fatalf("%s: result %v/%v, want ours %v/%v", p, r, inR, o, inO)
				}
			}
			if !bad[p] {
				if r2, in2 := back[p]; in2 != inR || r2 != r {
					t.Fatalf("%s: the result depends on the order", p)
				}
			}
		}
	})
}

func TestConflictErrorIsBounded(t *testing.T) {
	var paths []string
	for i := range 50 {
		paths = append(paths, strings.Repeat("x", 5000)+string(rune('a'+i%26)))
	}
	msg := (&ConflictError{Source: strings.Repeat("a", 40), Main: strings.Repeat("b", 40), Paths: paths}).Error()
	if len(msg) > 3000 || !strings.Contains(msg, "and 40 more") {
		t.Errorf("%d bytes: %.300s", len(msg), msg)
	}
}

// With [git] verify = "signed", the commits the leader writes for an
// experiment (a checked policy commit, a merge commit) are its own and
// pass VerifyCommit; the branch's unsigned commit does not.
func TestCheckedCommitsAreTrustedOwnCommits(t *testing.T) {
	_, ring := pgpEntity(t, "alice")
	v, err := NewVerifier(ring, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url, Verifier: v})
	_, branch, _ := staleBranch(t, srv, url)
	mustFetch(t, s)
	merge, err := s.CommitMerge(context.Background(), MergeRequest{Source: branch, Message: "merge"})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := s.CommitPolicy(context.Background(), CommitPolicyRequest{Policy: "gamma", Message: "c",
		Files: map[string][]byte{"policy.toml": []byte(policyFile("allow", "", "true"))}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{merge, commit} {
		if who, err := s.VerifyCommit(h); err != nil || who != "reconciler" {
			t.Errorf("VerifyCommit(%.7s) = %q, %v", h, who, err)
		}
	}
	if _, err := s.VerifyCommit(branch); err == nil {
		t.Error("the branch's unsigned commit verified")
	}
}
