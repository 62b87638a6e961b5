package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
)

// gatewayPath fills req.Path from req.RawPath, the path as the client
// sent it, with engine.GatewayPath: the one reading of a path that every
// gateway form (:authorize, :mirror, ext_authz) shares. Without
// normalising, rules about "/internal/metrics" missed "//internal/metrics"
// (issue 16, attack 6), "/%2finternal/metrics" and "/internal\metrics"
// (issue 22, finding 8).
func gatewayPath(req *engine.Request, slashes engine.EscapedSlashes) error {
	p, err := engine.GatewayPath(req.RawPath, slashes)
	if err != nil {
		return err
	}
	req.Path = p
	return nil
}

// rawPathOf is the path of a request-target as sent, without its query:
// the origin form's path, or what follows the authority of the absolute
// form. u is uri parsed; url.URL's EscapedPath would re-escape what it
// finds unusual (a backslash becomes "%5C"), and raw_path promises the
// client's own spelling.
func rawPathOf(uri string, u *url.URL) string {
	p, _, _ := strings.Cut(uri, "?")
	if u.Scheme == "" {
		return p
	}
	if u.Opaque != "" {
		return ""
	}
	rest := p[len(u.Scheme)+1:] // "scheme:" as sent, in any case
	if !strings.HasPrefix(rest, "//") {
		return rest
	}
	if i := strings.IndexByte(rest[2:], '/'); i >= 0 {
		return rest[2+i:]
	}
	return ""
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
