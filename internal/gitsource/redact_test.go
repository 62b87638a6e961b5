package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/o/r.git":                        "https://github.com/o/r.git",
		"https://x-access-token:ghs_abc@github.com/o/r.git": "https://xxxxx@github.com/o/r.git",
		"https://ghp_tokenonly@github.com/o/r.git":          "https://xxxxx@github.com/o/r.git",
		"ssh://git@github.com/o/r.git":                      "ssh://git@github.com/o/r.git",
		"ssh://git:pw@github.com/o/r.git":                   "ssh://git@github.com/o/r.git",
		"git@github.com:o/r.git":                            "git@github.com:o/r.git",
		"file:///srv/r.git":                                 "file:///srv/r.git",
		"/srv/r.git":                                        "/srv/r.git",
		"https://h/r.git?token=abc&x=1":                     "https://h/r.git?token=xxxxx&x=xxxxx",
		"https://u:p%zz@h/r.git":                            "https://xxxxx@h/r.git",
		"https://a:b@c@h/r.git":                             "https://xxxxx@h/r.git",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrub(t *testing.T) {
	raw := "https://user:pw1234@h.example/r.git"
	text := `Get "https://user:pw1234@h.example/r.git/info/refs": token tok-5678 refused; see http://a:b@c/`
	got := scrub(text, raw, "tok-5678")
	for _, secret := range []string{"pw1234", "tok-5678", "a:b@"} {
		if strings.Contains(got, secret) {
			t.Errorf("scrub left %q in %q", secret, got)
		}
	}
}

// FuzzRedact checks that Redact never panics, is idempotent, and that an
// http(s) URL's credentials vanish: redacting it gives exactly what
// redacting the same URL with "xxxxx" as its user information gives.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"github.com/o/r.git", "h:1/p?q=1#f", "a@b/c", "[::1]:80/x", "%zz", "h/p@q", "a b@h", ""} {
		f.Add(s, "s3cretValue")
	}
	secretRE := regexp.MustCompile(`^[A-Za-z0-9_]{8,40}$`)
	f.Fuzz(func(t *testing.T, rest, secret string) {
		out := Redact(rest)
		if again := Redact(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", rest, out, again)
		}
		if !secretRE.MatchString(secret) {
			return
		}
		for _, tc := range []struct{ scheme, cred string }{
			{"https", "x-access-token:" + secret},
			{"https", secret},
			{"http", secret + ":x-oauth-basic"},
		} {
			raw := tc.scheme + "://" + tc.cred + "@" + rest
			got, want := Redact(raw), Redact(tc.scheme+"://xxxxx@"+rest)
			if got != want {
				t.Fatalf("Redact(%q) = %q, want %q", raw, got, want)
			}
			if u, err := url.Parse(got); err == nil && u.User != nil {
				if _, has := u.User.Password(); has {
					t.Fatalf("Redact(%q) keeps a password", raw)
				}
			}
		}
	})
}

func TestOpenAcceptsEveryRemoteKind(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url       string
		token     string
		basicAuth bool
	}{
		{"https://github.com/o/r.git", "tok", true},
		{"https://github.com/o/r.git", "", false},
		{"ssh://git@github.com/o/r.git", "tok", false}, // go-git's ssh-agent and known_hosts defaults
		{"git@github.com:o/r.git", "", false},
		{"file:///srv/r.git", "tok", false},
		{"relative/dir.git", "", false},
	} {
		s, err := Open(ctx, Config{URL: tc.url, Token: tc.token, Dir: filepath.Join(t.TempDir(), "c")})
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		_, isBasic := s.auth.(*githttp.BasicAuth)
		if isBasic != tc.basicAuth {
			t.Errorf("%s: auth = %T", tc.url, s.auth)
		}
		if strings.HasPrefix(tc.url, "relative") && !filepath.IsAbs(s.cfg.URL) {
			t.Errorf("a relative path stays relative: %s", s.cfg.URL)
		}
	}
}

func TestOpenReopensAndFollowsAURLChange(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "c")
	if _, err := Open(ctx, Config{URL: "https://a.example/r.git", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{URL: "https://b.example/r.git", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if urls := s.remote.Config().URLs; len(urls) != 1 || urls[0] != "https://b.example/r.git" {
		t.Errorf("remote URLs = %v", urls)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, cfg := range []Config{
		{Dir: dir},
		{URL: "/r.git"},
		{URL: "/r.git", Dir: dir, Path: "../up"},
		{URL: "/r.git", Dir: dir, Branch: "bad..name"},
	} {
		if _, err := Open(ctx, cfg); err == nil {
			t.Errorf("%+v was accepted", cfg)
		}
	}
}

func TestReasonOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Reason
	}{
		{fmt.Errorf("get: %w", context.DeadlineExceeded), ReasonTimeout},
		{context.Canceled, ReasonCanceled},
		{fmt.Errorf("%w: bad", transport.ErrAuthorizationFailed), ReasonAuth},
		{transport.ErrAuthenticationRequired, ReasonAuth},
		{transport.ErrRepositoryNotFound, ReasonNotFound},
		{transport.ErrEmptyRemoteRepository, ReasonNotFound},
		{errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), ReasonAuth},
		{errors.New("error creating SSH agent: \"SSH agent requested, but could not detect Pageant or Windows native SSH agent\""), ReasonAuth},
		{errors.New("ssh: handshake failed: knownhosts: key is unknown"), ReasonAuth},
		{errors.New("dial tcp: connection refused"), ReasonNetwork},
	} {
		if got := reasonOf(tc.err); got != tc.want {
			t.Errorf("reasonOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
