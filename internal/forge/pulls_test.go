package forge

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/policyrollout/reconciler/internal/githubemu"
)

func TestOpenPullRequestsAllPages(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 230; i++ {
		e.repo.OpenPull(githubemu.Pull{HeadRef: fmt.Sprintf("f%d", i), HeadSHA: sha("c"), BaseRef: "main", Author: "alice"})
	}
	other := e.repo.OpenPull(githubemu.Pull{HeadRef: "o", HeadSHA: sha("d"), BaseRef: "develop"})
	e.repo.UpdatePull(5, func(p *githubemu.Pull) { p.State = "closed" })
	prs, err := e.c.OpenPullRequests(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 229 || e.requests("GET", "/pulls") != 3 {
		t.Fatalf("got %d pull requests in %d requests", len(prs), e.requests("GET", "/pulls"))
	}
	p := prs[0]
	if p.Number != 1 || p.HeadSHA != sha("c") || p.HeadRef != "f0" || p.BaseRef != "main" || p.Title == "" ||
		p.Author != "alice" || p.URL != e.emu.URL()+"/o/r/pull/1" || p.HeadRepo != "o/r" || p.State != "open" {
		t.Errorf("first = %+v", p)
	}
	for _, p := range prs {
		if p.Number == 5 || p.Number == other {
			t.Errorf("listed #%d", p.Number)
		}
	}
	all, _ := e.c.OpenPullRequests(context.Background(), "")
	if len(all) != 230 {
		t.Errorf("every base: %d", len(all))
	}
}

func TestPullRequest(t *testing.T) {
	e := newEnv(t)
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main", HeadRepo: "fork/r"})
	p, err := e.c.PullRequest(context.Background(), n)
	if err != nil || p.Mergeable == nil || !*p.Mergeable || p.HeadRepo != "fork/r" || p.Merged {
		t.Fatalf("pull = %+v, %v", p, err)
	}
	_, err = e.c.PullRequest(context.Background(), 99)
	if !errors.Is(err, ErrNotFound) || Retryable(err) {
		t.Errorf("missing: %v", err)
	}
}

func TestChangedFiles(t *testing.T) {
	e := newEnv(t)
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	var files []githubemu.File
	for i := 0; i < 150; i++ {
		files = append(files, githubemu.File{Filename: fmt.Sprintf("p%d/policy.toml", i), Status: "modified"})
	}
	e.repo.SetFiles(n, files)
	got, err := e.c.ChangedFiles(context.Background(), n)
	if err != nil || len(got) != 150 || got[149] != "p149/policy.toml" {
		t.Fatalf("files = %d, %v", len(got), err)
	}
}

func TestMerge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	_, err := e.c.Merge(ctx, n, sha("d"), "")
	if !errors.Is(err, ErrAborted) || Retryable(err) {
		t.Errorf("stale head: %v", err)
	}
	e.repo.UpdatePull(n, func(p *githubemu.Pull) { p.Mergeable = new(bool) })
	if _, err := e.c.Merge(ctx, n, sha("c"), MergeSquash); !errors.Is(err, ErrFailedPrecondition) {
		t.Errorf("not mergeable: %v", err)
	}
	e.repo.UpdatePull(n, func(p *githubemu.Pull) { t := true; p.Mergeable = &t })
	var method string
	e.emu.OnMerge(func(m githubemu.MergeRequest) (string, error) { method = m.Method; return sha("e"), nil })
	got, err := e.c.Merge(ctx, n, sha("c"), MergeRebase)
	if err != nil || got != sha("e") || method != "rebase" {
		t.Fatalf("merge = %s, %v (method %s)", got, err, method)
	}
	// Again (a retry whose first answer was lost): already merged at sha.
	if again, err := e.c.Merge(ctx, n, sha("c"), MergeRebase); err != nil || again != sha("e") {
		t.Errorf("second merge = %s, %v", again, err)
	}
	if _, err := e.c.Merge(ctx, n, sha("c"), "octopus"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad method: %v", err)
	}
}

// A merge whose answer is lost (5xx after GitHub merged) is retried, meets
// 405, and is recognized as done.
func TestMergeLostAnswer(t *testing.T) {
	e := newEnv(t)
	n := e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	e.emu.Inject(githubemu.Fault{Method: "PUT", Path: "/merge", AfterHandling: true, Status: 502})
	got, err := e.c.Merge(context.Background(), n, sha("c"), "")
	if p, _ := e.repo.Pull(n); err != nil || got != p.MergeCommitSHA || !p.Merged {
		t.Fatalf("merge = %s, %v; pull %+v", got, err, p)
	}
}

func TestCreatePullRequest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.repo.SetRef("revert-7", sha("r"))
	p, err := e.c.CreatePullRequest(ctx, "revert-7", "main", "Revert to generation 7", "body")
	if err != nil || p.HeadSHA != sha("r") || p.BaseRef != "main" || p.Title != "Revert to generation 7" {
		t.Fatalf("create = %+v, %v", p, err)
	}
	again, err := e.c.CreatePullRequest(ctx, "revert-7", "main", "Revert to generation 7", "body")
	if err != nil || again.Number != p.Number {
		t.Errorf("second create = %+v, %v", again, err)
	}
	if _, err := e.c.CreatePullRequest(ctx, "no-such-branch", "main", "t", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unknown head: %v", err)
	}
	e.repo.SetRef("revert-8", sha("s"))
	e.emu.Inject(githubemu.Fault{Method: "POST", Path: "/pulls", AfterHandling: true})
	lost, err := e.c.CreatePullRequest(ctx, "revert-8", "main", "Revert", "")
	if err != nil || lost.HeadSHA != sha("s") || len(e.repo.Pulls()) != 2 {
		t.Errorf("lost answer: %+v, %v, %d pulls", lost, err, len(e.repo.Pulls()))
	}
}

func TestPermissionLevels(t *testing.T) {
	e := newEnv(t)
	for role, write := range map[string]bool{"read": false, "triage": false, "write": true, "maintain": true, "admin": true, "none": false} {
		e.repo.SetPermission("u-"+role, role)
		got, err := e.c.Permission(context.Background(), "u-"+role)
		if err != nil || got != role || CanWrite(got) != write {
			t.Errorf("%s: %q, %v (CanWrite %v)", role, got, err, CanWrite(got))
		}
	}
	if got, err := e.c.Permission(context.Background(), "stranger"); err != nil || got != PermNone {
		t.Errorf("unknown user: %q, %v", got, err)
	}
	if _, err := e.c.Permission(context.Background(), "../admin"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad login: %v", err)
	}
	if CanWrite("WRITE") || CanWrite("") {
		t.Error("CanWrite takes only the lower-case levels")
	}
}
