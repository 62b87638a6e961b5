package forge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

const testToken = "ghp_S3cretTokenValue0123456789abcdef"

// clock is a fake clock whose Sleep advances it.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// env is an emulator, its repository o/r and a client for it.
type env struct {
	emu   *githubemu.Server
	repo  *githubemu.Repo
	clock *clock
	logs  *testlog.Buffer
	cfg   Config
	c     *Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clock: &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, logs: &testlog.Buffer{}}
	e.emu = githubemu.New(githubemu.Options{Token: testToken, Now: e.clock.Now})
	t.Cleanup(e.emu.Close)
	e.repo = e.emu.AddRepo("o/r", "main")
	e.repo.SetRef("main", sha("b"))
	e.cfg = Config{
		Repository: "o/r", APIURL: e.emu.URL(), Token: testToken,
		Logger: hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Trace}),
		Now:    e.clock.Now, Sleep: e.clock.Sleep,
		Jitter: func(d time.Duration) time.Duration { return d / 2 },
	}
	e.c = e.client(t)
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), testToken) {
			t.Errorf("the token is in the logs:\n%s", e.logs.String())
		}
	})
	return e
}

// client is a fresh client, as after a restart or a change of leader.
func (e *env) client(t *testing.T) *Client {
	t.Helper()
	c, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requests counts the REST requests whose method and path match.
func (e *env) requests(method, pathPart string) int {
	n := 0
	for _, r := range e.emu.Requests() {
		if r.Method == method && strings.Contains(r.Path, pathPart) {
			n++
		}
	}
	return n
}

func sha(c string) string { return strings.Repeat(c, 40) }

// noToken fails when err's text holds the token.
func noToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), testToken) {
		t.Errorf("the token is in an error: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{Repository: "o", Token: "t"},
		{Repository: "o/r/x", Token: "t"},
		{Repository: "o/r"},
		{Repository: "o/r", Token: "t", APIURL: "ftp://x"},
		{Repository: "o/r", Token: "t", APIURL: "https://user:" + testToken + "@ghe.example.com"},
		{Repository: "o/r", Token: "t", APIURL: "https://ghe.example.com/?token=" + testToken},
		{Repository: "o/r", Token: "t", APIURL: "://" + testToken},
	} {
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want ErrInvalidArgument", cfg, err)
		}
		noToken(t, err)
	}
}

func TestAPIBase(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "https://api.github.com/",
		"https://api.github.com":              "https://api.github.com/",
		"https://ghe.example.com":             "https://ghe.example.com/api/v3/",
		"https://ghe.example.com/":            "https://ghe.example.com/api/v3/",
		"https://ghe.example.com/api/v3":      "https://ghe.example.com/api/v3/",
		"https://ghe.example.com/api/v3/":     "https://ghe.example.com/api/v3/",
		"http://127.0.0.1:8080/github":        "http://127.0.0.1:8080/github/",
		"https://corp.api.example.com":        "https://corp.api.example.com/",
		"https://ghe.example.com:8443/api/v3": "https://ghe.example.com:8443/api/v3/",
	} {
		got, err := apiBase(in)
		if err != nil || got.String() != want {
			t.Errorf("apiBase(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}

// Every way of writing a GitHub Enterprise base reaches the emulator,
// which serves under /api/v3 like GHE.
func TestEnterpriseBaseURLs(t *testing.T) {
	e := newEnv(t)
	e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	for _, base := range []string{e.emu.URL(), e.emu.URL() + "/", e.emu.URL() + "/api/v3", e.emu.APIURL()} {
		cfg := e.cfg
		cfg.APIURL = base
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if prs, err := c.OpenPullRequests(context.Background(), "main"); err != nil || len(prs) != 1 {
			t.Errorf("%s: %v %v", base, prs, err)
		}
	}
	other := githubemu.New(githubemu.Options{Token: testToken, Prefix: "/github"})
	defer other.Close()
	other.AddRepo("o/r", "main")
	cfg := e.cfg
	cfg.APIURL = other.URL() + "/github"
	c, _ := New(cfg)
	if _, err := c.OpenPullRequests(context.Background(), ""); err != nil {
		t.Errorf("custom path: %v", err)
	}
}

func TestAuthorizationHeader(t *testing.T) {
	e := newEnv(t)
	if _, err := e.c.OpenPullRequests(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	r := e.emu.Requests()[0]
	if r.Header.Get("Authorization") != "Bearer REDACTED" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" ||
		!strings.HasPrefix(r.Header.Get("User-Agent"), "go-github/") {
		t.Errorf("headers = %v", r.Header)
	}
	cfg := e.cfg
	cfg.Token = "ghp_wrongwrongwrongwrongwrong"
	bad, _ := New(cfg)
	_, err := bad.OpenPullRequests(context.Background(), "")
	if !errors.Is(err, ErrUnauthenticated) || strings.Contains(err.Error(), cfg.Token) {
		t.Errorf("wrong token: %v", err)
	}
}

// A redirect to another host never carries the token.
func TestTokenOnlyForAPIHost(t *testing.T) {
	var seen []string
	next := roundTrip(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.URL.Host+"="+r.Header.Get("Authorization"))
		return nil, errors.New("stop")
	})
	tr := &authTransport{next: next, token: "tok", host: "api.example.com"}
	for _, u := range []string{"https://api.example.com/x", "https://elsewhere.example.com/x"} {
		req, _ := http.NewRequest("GET", u, nil)
		_, _ = tr.RoundTrip(req)
	}
	if seen[0] != "api.example.com=Bearer tok" || seen[1] != "elsewhere.example.com=" {
		t.Errorf("seen %v", seen)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Transport errors that quote the token or a credentialed URL are scrubbed.
func TestTransportErrorsScrubbed(t *testing.T) {
	e := newEnv(t)
	cfg := e.cfg
	cfg.HTTPClient = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("dial https://x:" + testToken + "@host failed; Authorization: Bearer " + testToken +
			" and ghp_AnotherTokenThatLooksReal1234")
	})}
	c, _ := New(cfg)
	_, err := c.PullRequest(context.Background(), 1)
	if !errors.Is(err, ErrUnavailable) || !Retryable(err) {
		t.Fatalf("err = %v", err)
	}
	noToken(t, err)
	if strings.Contains(err.Error(), "ghp_Another") {
		t.Errorf("token-shaped text kept: %v", err)
	}
	if strings.Contains(e.logs.String(), "ghp_Another") {
		t.Errorf("token-shaped text logged: %s", e.logs.String())
	}
}

func TestContextCanceled(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.c.OpenPullRequests(ctx, "")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

// A server (or proxy) that quotes the token back in its error bodies: no
// method lets it reach an error or a log line.
func TestTokenNeverLeaks(t *testing.T) {
	e := newEnv(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		status := []int{502, 422, 403, 404, 405, 409}[len(r.URL.Path)%6]
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"message":"saw ` + r.Header.Get("Authorization") + ` via https://x:` + testToken +
			`@proxy","errors":[{"message":"token ` + testToken + `"}]}`))
	}))
	defer echo.Close()
	cfg := e.cfg
	cfg.APIURL = echo.URL + "/api/v3"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var errs []error
	collect := func(err error) { errs = append(errs, err) }
	_, err = c.OpenPullRequests(ctx, "main")
	collect(err)
	_, err = c.PullRequest(ctx, 1)
	collect(err)
	_, err = c.ChangedFiles(ctx, 1)
	collect(err)
	_, err = c.UpsertComment(ctx, 1, "x")
	collect(err)
	_, err = c.Comment(ctx, 1, "x")
	collect(err)
	collect(c.SetStatus(ctx, sha("c"), ContextPreview, StatePending, "x", ""))
	_, err = c.Merge(ctx, 1, sha("c"), "")
	collect(err)
	_, err = c.Permission(ctx, "alice")
	collect(err)
	_, err = c.CreatePullRequest(ctx, "a", "main", "t", "b")
	collect(err)
	for _, err := range errs {
		if err == nil {
			t.Error("a call against the failing server succeeded")
			continue
		}
		t.Log(err)
		noToken(t, err)
		if strings.Contains(err.Error(), "Bearer ") && !strings.Contains(err.Error(), "Bearer [REDACTED]") {
			t.Errorf("an Authorization value survived: %v", err)
		}
	}
	if !strings.Contains(e.logs.String(), "retrying") {
		t.Error("expected retry lines in the log")
	}
}
