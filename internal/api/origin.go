package api

import (
	"mime"
	"net/http"
	"strings"

	"github.com/policyrollout/reconciler/internal/auth"
)

// Browser defences. A page on another site can make a browser send
// "simple" requests (GET, HEAD, POST with a form or text/plain body)
// anywhere, credentials or not, and a page whose name rebinds to
// 127.0.0.1 talks to a loopback node as if it were the same site. So:
//   - a write must say Content-Type: application/json, which a page can
//     send only after a CORS preflight that this API never grants to
//     foreign origins;
//   - a request whose Origin (or Sec-Fetch-Site) shows another site is
//     refused unless [api] allowed_origins lists that origin;
//   - a node bound to loopback answers only Host names of this machine.

// browserCheck runs the checks that apply to rule's class and answers
// when one fails. It also answers CORS preflights.
func (s *Server) browserCheck(w http.ResponseWriter, r *http.Request, rule *routeRule) bool {
	if rule.class == classWebhook {
		return true // authenticated by its signature; GitHub names the node as it likes
	}
	if s.loopbackOnly && rule.class != classDecision && !auth.LoopbackHost(r.Host) {
		s.fail(w, r, errorf(kindPermissionDenied,
			"Host %q is not a name of this machine: this node listens on loopback only and answers requests for localhost, 127.0.0.1 or [::1] (DNS rebinding protection)",
			r.Host))
		return false
	}
	if !s.originAllowed(w, r, rule) {
		return false
	}
	if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" {
		s.preflight(w)
		return false
	}
	if rule.class == classAPI && needsJSON(r) && !isJSON(r.Header.Get("Content-Type")) {
		s.fail(w, r, errorf(kindUnsupportedMediaType,
			"a write must carry \"Content-Type: application/json\", not %q", r.Header.Get("Content-Type")))
		return false
	}
	return true
}

// originAllowed refuses a request that a browser sent from another site,
// unless the origin is configured. :authorize is exempt: its headers are
// the original client's, forwarded by a gateway as data.
func (s *Server) originAllowed(w http.ResponseWriter, r *http.Request, rule *routeRule) bool {
	origin := r.Header.Get("Origin")
	if rule.class == classDecision && strings.Contains(r.URL.Path, ":authorize") {
		return true
	}
	if origin == "" {
		site := r.Header.Get("Sec-Fetch-Site")
		if site != "cross-site" && site != "same-site" {
			return true // not a browser, or the user typed the URL
		}
		s.fail(w, r, errorf(kindPermissionDenied,
			"a browser request from another site (Sec-Fetch-Site: %s) is refused: this API serves no pages", site))
		return false
	}
	if allowed, ok := s.origins[normalOrigin(origin)]; ok {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", allowed)
		h.Add("Vary", "Origin")
		return true
	}
	s.fail(w, r, errorf(kindPermissionDenied,
		"a browser request from origin %q is refused: list it in [api] allowed_origins to allow it", origin))
	return false
}

// preflight answers a CORS preflight of an allowed origin.
func (s *Server) preflight(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// needsJSON reports whether r must carry a JSON content type: POST, PUT
// and PATCH always (the methods that carry a body), any other write when
// it names a content type at all.
func needsJSON(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return isWrite(r.Method) && r.Header.Get("Content-Type") != ""
}

// isJSON accepts application/json with optional parameters (charset).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// normalOrigin lower-cases an origin and drops a trailing slash, as
// allowed_origins entries are compared.
func normalOrigin(o string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(o)), "/")
}

// originSet indexes the configured origins by their normal form.
func originSet(origins []string) map[string]string {
	m := make(map[string]string, len(origins))
	for _, o := range origins {
		m[normalOrigin(o)] = strings.TrimSuffix(o, "/")
	}
	return m
}
