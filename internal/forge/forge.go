// Package forge is the reconciler's GitHub client, on go-github v60: pull
// requests, the one preview comment per pull request, commit statuses,
// merges, permission checks. Every call retries what is worth retrying
// (5xx, short rate limits) within a bound and otherwise returns a typed
// error that says whether to retry later (ErrRateLimited, ErrUnavailable)
// or that a human is needed. The token never appears in an error or a log
// line. It runs on the leader only and never on the decision path.
package forge

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/hashicorp/go-hclog"
)

// DefaultAPIURL is github.com's REST base.
const DefaultAPIURL = "https://api.github.com/"

// Config is what New needs.
type Config struct {
	// Repository is "owner/name".
	Repository string
	// APIURL is the REST base: empty for github.com; for GitHub Enterprise
	// the host ("https://ghe.example.com", to which "/api/v3/" is added,
	// as go-github's WithEnterpriseURLs does) or the full base
	// ("https://ghe.example.com/api/v3"). Any other path is used as given.
	// A trailing slash is optional. It must not hold credentials.
	APIURL string
	// Token authenticates every request ("Authorization: Bearer").
	Token string
	// Logger receives debug lines about retries; none when nil.
	Logger hclog.Logger
	// HTTPClient carries the requests; a client with a 30s timeout when nil.
	HTTPClient *http.Client
	// Now and Sleep are the clock (tests inject fakes). Sleep must return
	// early with ctx's error when ctx ends.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a random duration in [0, d); math/rand when nil.
	Jitter func(d time.Duration) time.Duration
	// MaxAttempts bounds the tries of one call (default 4).
	MaxAttempts int
	// MaxWait is the longest a call waits in one go before it gives up
	// with ErrRateLimited or ErrUnavailable (default 30s), so a caller on
	// a schedule is never blocked for a rate limit's full reset.
	MaxWait time.Duration
}

// Client talks to one repository. It is safe for concurrent use; comment
// upserts on the same pull request are serialized.
type Client struct {
	cfg         Config
	owner, name string
	base        *url.URL
	http        *http.Client
	log         hclog.Logger

	gateMu sync.Mutex
	gate   ErrRateLimited // requests wait or fail until gate.Until

	mu       sync.Mutex
	comments map[int]cachedComment // preview comment per pull request
	prLocks  map[int]chan struct{}
}

// New checks cfg and returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	owner, name, ok := strings.Cut(cfg.Repository, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, invalidf("github.repository must be \"owner/name\", not %q", cfg.Repository)
	}
	if cfg.Token == "" {
		return nil, invalidf("the GitHub token is empty")
	}
	base, err := apiBase(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	c := &Client{cfg: cfg, owner: owner, name: name, base: base, log: cfg.Logger,
		comments: map[int]cachedComment{}, prLocks: map[int]chan struct{}{}}
	hc := *cfg.HTTPClient
	hc.Transport = &authTransport{next: transportOf(cfg.HTTPClient), token: cfg.Token, host: base.Host}
	c.http = &hc
	return c, nil
}

// withDefaults fills the optional fields of cfg.
func withDefaults(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 30 * time.Second
	}
	return cfg
}

// apiBase turns Config.APIURL into go-github's BaseURL, which must end in
// "/" (NewRequest refuses it otherwise).
func apiBase(raw string) (*url.URL, error) {
	if raw == "" {
		raw = DefaultAPIURL
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		// url.Parse's error quotes the input, which may hold a credential.
		return nil, invalidf("github.api_url is not an http(s) URL")
	case u.User != nil:
		return nil, invalidf("github.api_url must not hold credentials; the token comes from github.token_env")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, invalidf("github.api_url must not have a query or fragment")
	}
	path := strings.TrimSuffix(u.Path, "/")
	if path == "" && !dotcomLike(u.Hostname()) {
		path = "/api/v3" // a GitHub Enterprise host: its REST API lives here
	}
	u.Path, u.RawPath = path+"/", ""
	return u, nil
}

// dotcomLike mirrors go-github's WithEnterpriseURLs: hosts named api.* or
// *.api.* serve the API at their root.
func dotcomLike(host string) bool {
	return strings.HasPrefix(host, "api.") || strings.Contains(host, ".api.")
}

// transportOf is hc's transport or the default one.
func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}

// authTransport adds the token to requests for the API host only, so a
// redirect elsewhere never carries it.
type authTransport struct {
	next  http.RoundTripper
	token string
	host  string
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(req)
}

// gh returns a go-github client for one attempt. A fresh one each time,
// because go-github also refuses requests after a rate limit, by the wall
// clock; the gate in retry.go does that job with the injected clock.
func (c *Client) gh() *github.Client {
	g := github.NewClient(c.http)
	b := *c.base
	g.BaseURL = &b
	return g
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// PullRequest is what the reconciler needs of a pull request.
type PullRequest struct {
	Number  int
	Title   string
	URL     string // the web page
	Author  string // login
	HeadSHA string
	HeadRef string
	// HeadRepo is the head's "owner/name"; another repository for a fork.
	HeadRepo string
	BaseRef  string
	State    string // "open" or "closed"
	Draft    bool
	Merged   bool
	// MergeCommitSHA is GitHub's merge commit once merged (a test merge
	// commit before that).
	MergeCommitSHA string
	// Mergeable is known only from PullRequest (nil while GitHub computes it).
	Mergeable *bool
}

// pullFrom converts go-github's pull request.
func pullFrom(p *github.PullRequest) PullRequest {
	return PullRequest{
		Number: p.GetNumber(), Title: p.GetTitle(), URL: p.GetHTMLURL(), Author: p.GetUser().GetLogin(),
		HeadSHA: p.GetHead().GetSHA(), HeadRef: p.GetHead().GetRef(), HeadRepo: p.GetHead().GetRepo().GetFullName(),
		BaseRef: p.GetBase().GetRef(), State: p.GetState(), Draft: p.GetDraft(), Merged: p.GetMerged(),
		MergeCommitSHA: p.GetMergeCommitSHA(), Mergeable: p.Mergeable,
	}
}

// errContext wraps a context's end so errors.Is(err, context.Canceled)
// and DeadlineExceeded keep working.
func errContext(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Op: op, Kind: ErrUnavailable, Message: "gave up", cause: err}
	}
	return err
}
