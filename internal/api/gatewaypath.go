package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
)

// normalizedPath is the path rules see in the gateway forms: raw, the
// path as the client escaped it, normalised by engine.NormalizePath
// (dot segments, repeated slashes, escaped unreserved characters), then
// percent-decoded. Without normalising, rules about "/internal/metrics"
// missed "//internal/metrics" (issue 16, attack 6).
func normalizedPath(raw string) string {
	norm := engine.NormalizePath(raw)
	path, err := url.PathUnescape(norm)
	if err != nil { // cannot happen: every "%" of norm starts an escape
		return norm
	}
	return path
}

// rawTail is the escaped form of tail, the decoded path after the verb
// (":authorize/…" or ":mirror/…") of the escaped request path.
func rawTail(r *http.Request, tail string) string {
	esc := r.URL.EscapedPath()
	for _, verb := range []string{":authorize/", ":mirror/"} {
		if i := strings.Index(esc, verb); i >= 0 {
			return esc[i+len(verb)-1:]
		}
	}
	return (&url.URL{Path: tail}).EscapedPath()
}
