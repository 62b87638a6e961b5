package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
)

// gatewayPath is the path of the original request in the gateway forms:
// raw as the client sent it (X-Original-URI's path, or the escaped path
// after ":authorize"), and the path rules see: raw normalised by
// engine.NormalizePath, then percent-decoded. Without normalising, rules
// about "/internal/metrics" missed "//internal/metrics" (issue 16, attack 6).
// The caller has checked that X-Original-URI parses.
func gatewayPath(r *http.Request, tail string) (raw, path string) {
	if h := r.Header.Get(hdrOriginalURI); h != "" {
		if u, err := url.ParseRequestURI(h); err == nil {
			raw = u.EscapedPath()
		}
	} else {
		raw = rawTail(r, tail)
	}
	norm := engine.NormalizePath(raw)
	path, err := url.PathUnescape(norm)
	if err != nil { // cannot happen: every "%" of norm starts an escape
		path = norm
	}
	return raw, path
}

// rawTail is the escaped form of tail, the decoded path after ":authorize":
// the same number of segments from the end of the escaped request path.
func rawTail(r *http.Request, tail string) string {
	esc := r.URL.EscapedPath()
	if i := strings.Index(esc, ":authorize/"); i >= 0 {
		return esc[i+len(":authorize"):]
	}
	return tail
}
