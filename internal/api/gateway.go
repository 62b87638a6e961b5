package api

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
)

// Headers a gateway uses to describe the original request.
const (
	hdrOriginalMethod = "X-Original-Method"
	hdrOriginalURI    = "X-Original-Uri"
	hdrForwardedFor   = "X-Forwarded-For"
	hdrRealIP         = "X-Real-Ip"
	hdrForwardedHost  = "X-Forwarded-Host"
	hdrForwardedProto = "X-Forwarded-Proto"
)

// GatewayCheck is what a gateway says about an original request, in any
// gateway form: the headers of an nginx auth_request or Envoy ext_authz
// HTTP check (checkOf), or the attributes of an Envoy ext_authz gRPC
// CheckRequest (internal/extauthz). BuildGatewayRequest turns it into the
// request a policy sees.
type GatewayCheck struct {
	// Method is the original method.
	Method string
	// URI is the original request-target as sent (origin or absolute
	// form, not decoded); when empty, Path and Query are used.
	URI string
	// Path (already decoded) and Query describe the original request when
	// URI is empty (the path after ":authorize" and the check's query).
	Path  string
	Query url.Values
	// RawPath is Path as the client escaped it, when URI is empty; ""
	// means Path escaped again.
	RawPath string
	// Host is the original Host; TLS says whether the check came over TLS.
	Host string
	TLS  bool
	// Header holds every header of the check. Its forwarding headers
	// (X-Forwarded-For, X-Real-IP, X-Forwarded-Host, X-Forwarded-Proto) are
	// read only when Peer is a trusted proxy.
	Header http.Header
	// Peer is the address of whoever sent the check: the TCP peer of an
	// HTTP check, the downstream address Envoy saw for a gRPC one.
	Peer netip.Addr
}

// GatewayOptions are a node's settings for reading gateway checks.
type GatewayOptions struct {
	// Trusted are the proxies whose forwarding headers are believed.
	Trusted []netip.Prefix
	// Slashes is what a path's escaped slashes and backslashes become
	// ([api] path_escaped_slashes); the zero value rejects them.
	Slashes engine.EscapedSlashes
}

// BuildGatewayRequest builds the request that check describes, received
// at received, believing forwarding headers only from opts.Trusted peers:
//   - method: check.Method, upper-cased;
//   - raw_path and query: check.URI (nginx's $request_uri, Envoy's :path)
//     as sent, else check.RawPath and check.Query;
//   - path: raw_path read by engine.GatewayPath (normalised, escaped
//     slashes as opts.Slashes says, percent-decoded), so "/%61dmin" and
//     "//admin" match "/admin" rules;
//   - host and scheme: X-Forwarded-Host / X-Forwarded-Proto from a trusted
//     proxy, else Host and the scheme of the connection or the URI;
//   - headers: all of them, names lower-cased, repeated values joined ", ";
//   - source_ip: see clientIP.
//
// Its errors are errs.InvalidArgument: the check itself is malformed.
func BuildGatewayRequest(check *GatewayCheck, opts GatewayOptions, received time.Time) (*engine.Request, error) {
	trusted := opts.Trusted
	fromProxy := isTrusted(trusted, check.Peer)
	req := &engine.Request{
		Method:  strings.ToUpper(check.Method),
		Host:    strings.ToLower(check.Host),
		Scheme:  "http",
		Headers: lowerHeaders(check.Header),
		Time:    received,
	}
	if check.TLS {
		req.Scheme = "https"
	}
	if err := setOriginalURI(req, check); err != nil {
		return nil, err
	}
	if err := gatewayPath(req, opts.Slashes); err != nil {
		return nil, err
	}
	if fromProxy {
		if h := lastValue(check.Header.Get(hdrForwardedHost)); h != "" {
			req.Host = strings.ToLower(h)
		}
		if p := lastValue(check.Header.Get(hdrForwardedProto)); p != "" {
			req.Scheme = strings.ToLower(p)
		}
	}
	ip, err := clientIP(trusted, check.Header, check.Peer, fromProxy)
	if err != nil {
		return nil, err
	}
	if ip.IsValid() {
		req.SourceIP = ip.String()
	}
	return req, nil
}

// checkOf reads the HTTP gateway form: the original method from
// X-Original-Method (else the check's own: Envoy forwards the original
// one), the original URI from X-Original-URI (else the path after the
// verb, tail, and the check's own query: Envoy's path_prefix).
func checkOf(r *http.Request, tail string) *GatewayCheck {
	c := &GatewayCheck{
		Method: r.Method,
		URI:    r.Header.Get(hdrOriginalURI),
		Host:   r.Host,
		TLS:    r.TLS != nil,
		Header: r.Header,
		Peer:   peerAddr(r),
	}
	if m := r.Header.Get(hdrOriginalMethod); m != "" {
		c.Method = m
	}
	if c.URI == "" {
		c.Path, c.RawPath, c.Query = tail, rawTail(r, tail), r.URL.Query()
	}
	return c
}

// gatewayRequest builds the request of an HTTP gateway-form check.
func (s *decisions) gatewayRequest(r *http.Request, tail string, received time.Time) (*engine.Request, error) {
	return s.buildGateway(checkOf(r, tail), received)
}

// setOriginalURI fills raw_path and query from check.URI, else from its
// RawPath (or Path) and Query. Its errors name no part of the URI: the
// message reaches the client's response (X-Policy-Error) and the logs, and
// a query can hold credentials (issue 22, finding 9).
func setOriginalURI(req *engine.Request, check *GatewayCheck) error {
	raw := check.URI
	if raw == "" {
		req.RawPath = check.RawPath
		if req.RawPath == "" {
			req.RawPath = (&url.URL{Path: check.Path}).EscapedPath()
		}
		req.Query = firstValues(check.Query)
		return nil
	}
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return errorf(errs.InvalidArgument, "X-Original-URI is not a request URI (origin or absolute form, valid percent-escapes)")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errorf(errs.InvalidArgument, "X-Original-URI has a malformed query")
	}
	req.RawPath = rawPathOf(raw, u)
	req.Query = firstValues(q)
	if u.Scheme != "" {
		req.Scheme = strings.ToLower(u.Scheme)
	}
	return nil
}

// lowerHeaders copies h with lower-cased names and repeated values joined.
func lowerHeaders(h http.Header) engine.Pairs {
	out := make([]engine.Pair, 0, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		v := vs[0]
		if len(vs) > 1 {
			v = strings.Join(vs, ", ")
		}
		out = append(out, engine.Pair{Name: strings.ToLower(k), Value: v})
	}
	return engine.NewPairs(out)
}

// firstValues keeps the first value of each query parameter, the one
// url.Values.Get and most frameworks read.
func firstValues(q url.Values) engine.Pairs {
	if len(q) == 0 {
		return engine.Pairs{}
	}
	out := make([]engine.Pair, 0, len(q))
	for k, vs := range q {
		if len(vs) > 0 {
			out = append(out, engine.Pair{Name: k, Value: vs[0]})
		}
	}
	return engine.NewPairs(out)
}

// lastValue returns the last element of a comma-separated header value: the
// one the nearest proxy added.
func lastValue(v string) string {
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// peerAddr returns the address of the connection's peer (invalid when
// RemoteAddr is not an address, as in some tests).
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// isTrusted reports whether a is one of the trusted proxies.
func isTrusted(trusted []netip.Prefix, a netip.Addr) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP returns the client's address. From an untrusted peer it is the
// peer itself. From a trusted proxy it is the rightmost X-Forwarded-For hop
// that is not a trusted proxy (hops further left could be forged by the
// client), else the leftmost hop when all are trusted, else X-Real-IP, else
// the peer. A malformed hop that must be read is an error (400).
func clientIP(trusted []netip.Prefix, h http.Header, peer netip.Addr, fromProxy bool) (netip.Addr, error) {
	if !fromProxy {
		return peer, nil
	}
	if lines := h.Values(hdrForwardedFor); len(lines) > 0 {
		hops := strings.Split(strings.Join(lines, ","), ",")
		var last netip.Addr
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := parseHop(hops[i])
			if err != nil {
				return netip.Addr{}, err
			}
			if !isTrusted(trusted, a) {
				return a, nil
			}
			last = a
		}
		return last, nil
	}
	if v := h.Get(hdrRealIP); v != "" {
		return parseHop(v)
	}
	return peer, nil
}

// parseHop parses one forwarded address: an IP, optionally with a port or
// in brackets.
func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		if err2 != nil {
			return netip.Addr{}, errorf(errs.InvalidArgument, "a forwarded client address (X-Forwarded-For or X-Real-IP) is not an IP address")
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), nil
}
