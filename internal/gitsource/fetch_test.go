package gitsource

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/gittest"
)

const testToken = "ghs_S3cretTokenValue123"

func TestFetchOverHTTPWithToken(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{Token: testToken})
	s := newSource(t, Config{URL: url, Token: testToken})
	refs := mustFetch(t, s)
	head := srv.Head("policies", "main")
	if refs.Main.Hash != head || refs.Main.Ref != "main" {
		t.Fatalf("Main = %+v, want main at %s", refs.Main, head)
	}
	if got, want := refs.Main.String(), "main@sha1:"+head; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if len(refs.Branches) != 1 || len(refs.Pulls) != 0 {
		t.Errorf("refs = %+v", refs)
	}
}

func TestFetchWrongOrMissingToken(t *testing.T) {
	_, url := newRepo(t, gittest.Options{Token: testToken})
	for _, token := range []string{"", "ghs_WrongTokenValue456"} {
		s := newSource(t, Config{URL: url, Token: token})
		_, err := s.Fetch(context.Background())
		var re *RemoteError
		if !errors.Is(err, ErrFetch) || !errors.As(err, &re) || re.Reason != ReasonAuth || re.Retryable() {
			t.Fatalf("token %q: err = %v, want an auth ErrFetch", token, err)
		}
		if token != "" && strings.Contains(err.Error(), token) {
			t.Errorf("the token is in the error: %v", err)
		}
	}
}

func TestFetchLocalPathAndFileURL(t *testing.T) {
	srv, _ := newRepo(t, gittest.Options{})
	head := srv.Head("policies", "main")
	for _, url := range []string{srv.RepoPath("policies"), "file://" + srv.RepoPath("policies")} {
		s := newSource(t, Config{URL: url})
		if refs := mustFetch(t, s); refs.Main.Hash != head {
			t.Errorf("%s: Main = %v, want %s", url, refs.Main, head)
		}
	}
}

func TestFetchBranchesAndPullRefs(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	mustFetch(t, s)

	work := srv.Clone(url)
	mainHash := srv.Commit(work, map[string]string{"policies/beta/extra.toml": ""}, "main moves")
	srv.Push(work, "main")
	srv.CreateBranch(work, "feature")
	featHash := srv.Commit(work, map[string]string{"policies/beta/more.toml": ""}, "feature")
	srv.Push(work, "feature")
	srv.Push(work, "feature:pull") // a branch whose name would clash with pull refs
	srv.SetRef("policies", "refs/pull/7/head", featHash)
	srv.SetRef("policies", "refs/pull/7/merge", mainHash) // not a head: ignored

	refs := mustFetch(t, s)
	if refs.Main.Hash != mainHash || refs.Branches["feature"].Hash != featHash || refs.Branches["pull"].Hash != featHash {
		t.Fatalf("branches = %+v", refs.Branches)
	}
	pr, ok := refs.Pulls[7]
	if !ok || pr.Hash != featHash || pr.String() != "refs/pull/7/head@sha1:"+featHash || len(refs.Pulls) != 1 {
		t.Fatalf("pulls = %+v", refs.Pulls)
	}
	if _, err := s.FS(featHash); err != nil {
		t.Fatalf("the pull head's objects were not fetched: %v", err)
	}

	// Closed pull requests and deleted branches are pruned.
	srv.DeleteRef("policies", "refs/pull/7/head")
	srv.DeleteRef("policies", "refs/heads/feature")
	refs = mustFetch(t, s)
	if len(refs.Pulls) != 0 || len(refs.Branches) != 2 {
		t.Fatalf("after deletion: %+v", refs)
	}
}

func TestFetchUnchangedListsOnly(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	first := mustFetch(t, s)
	before := srv.Requests()
	again := mustFetch(t, s)
	if n := srv.Requests() - before; n != 1 {
		t.Errorf("an unchanged fetch made %d requests, want 1 (the ref listing)", n)
	}
	if again.Main != first.Main {
		t.Errorf("Main %v != %v", again.Main, first.Main)
	}
}

func TestFetchMissingBranchOrRepository(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	for _, cfg := range []Config{
		{URL: url, Branch: "release"},
		{URL: srv.URL("nope")},
		{URL: srv.RepoPath("nope")},
	} {
		s := newSource(t, cfg)
		_, err := s.Fetch(context.Background())
		var re *RemoteError
		if !errors.As(err, &re) || re.Reason != ReasonNotFound || !errors.Is(err, ErrFetch) {
			t.Errorf("%+v: err = %v, want a not-found ErrFetch", cfg, err)
		}
	}
}

func TestFetchRemoteDown(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url, Timeout: 2 * time.Second})
	mustFetch(t, s)
	srv.Down()
	base := runtime.NumGoroutine()
	start := time.Now()
	for i := 0; i < 5; i++ {
		_, err := s.Fetch(context.Background())
		var re *RemoteError
		if !errors.As(err, &re) || !errors.Is(err, ErrFetch) || !re.Retryable() {
			t.Fatalf("fetch %d from a stopped remote: %v", i, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("5 failed fetches took %v", d)
	}
	if n := settledGoroutines(base + 3); n > base+3 {
		t.Errorf("goroutines grew from %d to %d after failed fetches", base, n)
	}
	srv.Up()
	mustFetch(t, s)
}

func TestFetchSlowRemoteHitsDeadline(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url, Timeout: 300 * time.Millisecond})
	// The remote answers no request for an hour: only the deadline can
	// end Fetch, so no clock of this (perhaps loaded) machine is judged.
	srv.Slow(time.Hour)
	base := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() { _, err := s.Fetch(context.Background()); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("a remote that never answers held Fetch for 2 minutes with a 300ms timeout")
	}
	var re *RemoteError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) || re.Reason != ReasonTimeout || !errors.Is(err, ErrFetch) {
		t.Fatalf("err = %v, want a timeout ErrFetch", err)
	}
	// The caller's own context is honoured too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Fetch(ctx); !errors.Is(err, ErrFetch) {
		t.Fatalf("err = %v", err)
	}
	if n := settledGoroutines(base + 3); n > base+3 {
		t.Errorf("goroutines grew from %d to %d", base, n)
	}
	srv.Slow(0)
	mustFetch(t, s)
}

// settledGoroutines waits a little for goroutines to end and returns how
// many are left once at most want remain (or the wait is over).
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 50 && n > want; i++ {
		time.Sleep(20 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

func TestCredentialsNeverInErrorsOrLogs(t *testing.T) {
	srv, _ := newRepo(t, gittest.Options{Token: testToken})
	const urlSecret = "UrlEmbeddedSecret789"
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	withCreds := strings.Replace(srv.URL("missing"), "http://", "http://x-access-token:"+urlSecret+"@", 1)
	s := newSource(t, Config{URL: withCreds, Token: testToken, Logger: logger})
	_, err := s.Fetch(context.Background())
	if err == nil {
		t.Fatal("fetching a missing repository worked")
	}
	srv.Down()
	_, err2 := s.Fetch(context.Background())
	for _, text := range []string{err.Error(), err2.Error(), logs.String()} {
		if strings.Contains(text, urlSecret) || strings.Contains(text, testToken) {
			t.Errorf("a credential leaked: %s", text)
		}
	}
	if !strings.Contains(err.Error(), "xxxxx@127.0.0.1") {
		t.Errorf("the error should still name the (redacted) URL: %v", err)
	}
}
