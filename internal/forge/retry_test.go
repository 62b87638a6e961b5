package forge

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/githubemu"
)

func TestServerErrorsRetriedThenSuccess(t *testing.T) {
	e := newEnv(t)
	e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	e.emu.FailNext(2, 502)
	prs, err := e.c.OpenPullRequests(context.Background(), "main")
	if err != nil || len(prs) != 1 {
		t.Fatalf("list = %v, %v", prs, err)
	}
	slept := e.clock.Slept()
	if len(slept) != 2 || slept[1] <= slept[0] || slept[1] > backoffCap {
		t.Errorf("backoff = %v", slept)
	}
}

func TestServerErrorsExhausted(t *testing.T) {
	e := newEnv(t)
	e.emu.FailNext(10, 503)
	_, err := e.c.PullRequest(context.Background(), 1)
	var fe *Error
	if !errors.Is(err, ErrUnavailable) || !Retryable(err) || !errors.As(err, &fe) || fe.Status != 503 {
		t.Fatalf("err = %v", err)
	}
	if n := e.requests("GET", "/pulls/1"); n != 4 {
		t.Errorf("%d attempts, want MaxAttempts=4", n)
	}
	noToken(t, err)
}

// A primary limit that resets in an hour is not waited for: the caller
// gets ErrRateLimited with the reset, and later calls fail fast without a
// request until then.
func TestPrimaryRateLimit(t *testing.T) {
	e := newEnv(t)
	reset := e.clock.Now().Add(time.Hour)
	e.emu.Inject(githubemu.Fault{Kind: githubemu.PrimaryRateLimit, Reset: reset})
	_, err := e.c.OpenPullRequests(context.Background(), "")
	var rl *ErrRateLimited
	if !errors.As(err, &rl) || !rl.Until.Equal(reset) || rl.Limit != "primary" || !Retryable(err) {
		t.Fatalf("err = %v", err)
	}
	if at, ok := RetryAt(err); !ok || !at.Equal(reset) {
		t.Errorf("RetryAt = %v %v", at, ok)
	}
	before := len(e.emu.Requests())
	if err := e.c.SetStatus(context.Background(), sha("c"), ContextPreview, StatePending, "", ""); !errors.As(err, &rl) {
		t.Errorf("during the limit: %v", err)
	}
	if len(e.emu.Requests()) != before || len(e.clock.Slept()) != 0 {
		t.Error("a request was sent, or the client slept, during the limit")
	}
	e.clock.Sleep(context.Background(), time.Hour)
	if _, err := e.c.OpenPullRequests(context.Background(), ""); err != nil {
		t.Errorf("after the reset: %v", err)
	}
}

// A primary limit that resets soon is waited out.
func TestPrimaryRateLimitShort(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(githubemu.Fault{Kind: githubemu.PrimaryRateLimit, Reset: e.clock.Now().Add(10 * time.Second)})
	if _, err := e.c.OpenPullRequests(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if s := e.clock.Slept(); len(s) != 1 || s[0] < 10*time.Second {
		t.Errorf("slept %v", s)
	}
}

func TestSecondaryRateLimitHonoursRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(githubemu.Fault{Kind: githubemu.SecondaryRateLimit, RetryAfter: 7 * time.Second})
	n := e.openPull()
	id, err := e.c.Comment(context.Background(), n, "hello") // not idempotent, but a limit is safe to repeat
	if err != nil || id == 0 {
		t.Fatal(err)
	}
	if s := e.clock.Slept(); len(s) != 1 || s[0] < 7*time.Second || s[0] > 9*time.Second {
		t.Errorf("slept %v, want Retry-After 7s plus jitter", s)
	}
	if len(e.repo.Comments(n)) != 1 {
		t.Errorf("%d comments", len(e.repo.Comments(n)))
	}
}

func TestSecondaryRateLimitLong(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(githubemu.Fault{Kind: githubemu.SecondaryRateLimit, RetryAfter: 5 * time.Minute})
	_, err := e.c.PullRequest(context.Background(), 1)
	var rl *ErrRateLimited
	if !errors.As(err, &rl) || rl.Limit != "secondary" || !rl.Until.Equal(e.clock.Now().Add(5*time.Minute)) {
		t.Fatalf("err = %v", err)
	}
}

func TestTooManyRequestsHonoursRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(githubemu.Fault{Kind: githubemu.TooManyRequests, RetryAfter: 3 * time.Second})
	if err := e.c.SetStatus(context.Background(), sha("c"), ContextValidate, StateSuccess, "ok", ""); err != nil {
		t.Fatal(err)
	}
	if s := e.clock.Slept(); len(s) != 1 || s[0] < 3*time.Second {
		t.Errorf("slept %v", s)
	}
	e.emu.Inject(githubemu.Fault{Kind: githubemu.TooManyRequests, RetryAfter: 2 * time.Minute})
	err := e.c.SetStatus(context.Background(), sha("c"), ContextValidate, StateSuccess, "ok", "")
	var rl *ErrRateLimited
	if !errors.As(err, &rl) || rl.Limit != "429" || !rl.Until.Equal(e.clock.Now().Add(2*time.Minute)) {
		t.Fatalf("long 429: %v", err)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"12"}}, 12 * time.Second},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1767225630"}}, 30 * time.Second},
		{http.Header{}, defaultLimitWait},
	} {
		if got := retryAfter(c.h, now); got != c.want {
			t.Errorf("retryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestScrub(t *testing.T) {
	c := &Client{cfg: Config{Token: "sekret-token"}}
	in := "https://u:pw@ghe/x Authorization: token abc\n bearer xyz.123 sekret-token github_pat_11ABCDEFGHIJKLMNOPQRSTUV ok"
	got := c.scrub(in)
	for _, bad := range []string{"pw@", "abc", "xyz.123", "sekret-token", "github_pat_11"} {
		if strings.Contains(got, bad) {
			t.Errorf("scrub kept %q: %s", bad, got)
		}
	}
	if !strings.Contains(got, "ok") {
		t.Errorf("scrub lost the message: %s", got)
	}
}
