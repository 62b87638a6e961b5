package api

import (
	"encoding/hex"
	"hash/fnv"
	"net/http"
	"strings"
)

// Resource reads carry an HTTP ETag, a hash of the body, and answer 304
// to a matching If-None-Match, so that a poller (the web console polls
// every 2 s) is told "unchanged" in a few bytes. The body is still built
// to be hashed: this saves the network and the client's parsing, not the
// node's encoding, and it never applies to decisions (decide.go writes
// its own answers).

// bodyETag is the strong validator of body: 64-bit FNV-1a, enough to
// tell one version of a resource from the next.
func bodyETag(body []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(body)
	return `"` + hex.EncodeToString(h.Sum(nil)) + `"`
}

// notModified sets the ETag of a GET's body and reports whether the
// request's If-None-Match already names it (then it has answered 304).
func notModified(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return notModifiedTag(w, r, bodyETag(body))
}

// notModifiedTag is notModified with the tag given (a weak one for a
// resource whose body holds clock readings, status_etag.go).
func notModifiedTag(w http.ResponseWriter, r *http.Request, tag string) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "no-cache")
	if !etagMatches(r.Header.Get("If-None-Match"), tag) {
		return false
	}
	w.WriteHeader(http.StatusNotModified)
	return true
}

// etagMatches reports whether an If-None-Match list names tag (or is
// "*"); weak tags compare by their opaque part (RFC 9110 §13.1.2).
func etagMatches(header, tag string) bool {
	if header == "" {
		return false
	}
	tag = strings.TrimPrefix(tag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == tag || t == "*" {
			return true
		}
	}
	return false
}
