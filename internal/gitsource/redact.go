package gitsource

import (
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces a credential.
const redacted = "xxxxx"

// userinfoRE finds the user information of URLs inside any text: a scheme,
// "//", then everything up to the last "@" before the path, query or
// fragment, which is how net/url splits an authority.
var userinfoRE = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)[^/?#\s]*@`)

// Redact returns url fit for a log line or an error: the user information
// of an http(s) or unknown-scheme URL is replaced (a token is often passed
// as the user name), an ssh URL keeps its user name but not a password, and
// query values are replaced (pre-signed URLs carry secrets there). Text that
// does not parse as a URL still loses anything that looks like user
// information. scp-like addresses (git@host:path) are returned unchanged.
func Redact(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return userinfoRE.ReplaceAllString(raw, "${1}"+redacted+"@")
	}
	if u.User != nil {
		u.User = redactUser(u.Scheme, u.User)
	}
	if u.RawQuery != "" {
		u.RawQuery = redactQuery(u.Query())
	}
	return u.String()
}

// redactUser keeps an ssh user name, which names an account rather than
// proving one; any other user information may be a token.
func redactUser(scheme string, user *url.Userinfo) *url.Userinfo {
	if s := strings.ToLower(scheme); (s == "ssh" || s == "git+ssh" || s == "ssh+git") && user.Username() != "" {
		if name := user.Username(); !strings.ContainsAny(name, ":@") {
			return url.User(name)
		}
	}
	return url.User(redacted)
}

// redactQuery keeps the keys of a query, which help a reader, and hides
// the values.
func redactQuery(q url.Values) string {
	for k := range q {
		q[k] = []string{redacted}
	}
	return q.Encode()
}

// scrub removes credentials from free text such as a go-git error message:
// the given secrets wherever they appear, the raw remote URL, and the user
// information of any URL.
func scrub(text, rawURL, token string) string {
	if rawURL != "" && strings.Contains(rawURL, "://") {
		text = strings.ReplaceAll(text, rawURL, Redact(rawURL))
	}
	if token != "" {
		text = strings.ReplaceAll(text, token, redacted)
	}
	return userinfoRE.ReplaceAllString(text, "${1}"+redacted+"@")
}

// scrub removes the configured remote's credentials from text.
func (c *Config) scrub(text string) string { return scrub(text, c.URL, c.Token) }
