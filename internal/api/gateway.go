package api

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
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

// gatewayRequest builds the request that an nginx auth_request or Envoy
// ext_authz (HTTP) check describes:
//   - method: X-Original-Method, else the check's own method (Envoy sends
//     the original one);
//   - path and query: X-Original-URI (nginx's $request_uri), else the path
//     after ":authorize" and the check's own query (Envoy's path_prefix);
//     the path is percent-decoded, so "/%61dmin" matches "/admin" rules;
//   - host and scheme: X-Forwarded-Host / X-Forwarded-Proto from a trusted
//     proxy, else Host and the connection's scheme;
//   - headers: all of them, names lower-cased, repeated values joined ", ";
//   - source_ip: see clientIP.
func (s *Server) gatewayRequest(r *http.Request, tail string, received time.Time) (*engine.Request, error) {
	remote, fromProxy := s.peer(r)
	req := &engine.Request{
		Method:  r.Method,
		Host:    strings.ToLower(r.Host),
		Scheme:  "http",
		Headers: lowerHeaders(r.Header),
		Time:    received,
	}
	if m := r.Header.Get(hdrOriginalMethod); m != "" {
		req.Method = strings.ToUpper(m)
	}
	if r.TLS != nil {
		req.Scheme = "https"
	}
	if err := setOriginalURI(req, r, tail); err != nil {
		return nil, err
	}
	req.RawPath, req.Path = gatewayPath(r, tail)
	if fromProxy {
		if h := lastValue(r.Header.Get(hdrForwardedHost)); h != "" {
			req.Host = strings.ToLower(h)
		}
		if p := lastValue(r.Header.Get(hdrForwardedProto)); p != "" {
			req.Scheme = strings.ToLower(p)
		}
	}
	ip, err := s.clientIP(r, remote, fromProxy)
	if err != nil {
		return nil, err
	}
	if ip.IsValid() {
		req.SourceIP = ip.String()
	}
	return req, nil
}

// setOriginalURI fills path and query from X-Original-URI or the path suffix.
func setOriginalURI(req *engine.Request, r *http.Request, tail string) error {
	raw := r.Header.Get(hdrOriginalURI)
	if raw == "" {
		req.Path = tail
		req.Query = firstValues(r.URL.Query())
		return nil
	}
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return errorf(kindInvalidArgument, "X-Original-URI %q is not a request URI", raw)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errorf(kindInvalidArgument, "X-Original-URI %q has a malformed query", raw)
	}
	req.Path = u.Path
	req.Query = firstValues(q)
	if u.Scheme != "" {
		req.Scheme = strings.ToLower(u.Scheme)
	}
	return nil
}

// lowerHeaders copies h with lower-cased names and repeated values joined.
func lowerHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		v := vs[0]
		if len(vs) > 1 {
			v = strings.Join(vs, ", ")
		}
		out[strings.ToLower(k)] = v
	}
	return out
}

// firstValues keeps the first value of each query parameter, the one
// url.Values.Get and most frameworks read.
func firstValues(q url.Values) map[string]string {
	if len(q) == 0 {
		return nil
	}
	out := make(map[string]string, len(q))
	for k, vs := range q {
		if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

// lastValue returns the last element of a comma-separated header value: the
// one the nearest proxy added.
func lastValue(v string) string {
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// peer returns the address of the connection's peer and whether it is a
// trusted proxy.
func (s *Server) peer(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	a := ap.Addr().Unmap().WithZone("")
	return a, s.isTrusted(a)
}

func (s *Server) isTrusted(a netip.Addr) bool {
	for _, p := range s.trusted {
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
func (s *Server) clientIP(r *http.Request, peer netip.Addr, fromProxy bool) (netip.Addr, error) {
	if !fromProxy {
		return peer, nil
	}
	if lines := r.Header.Values(hdrForwardedFor); len(lines) > 0 {
		hops := strings.Split(strings.Join(lines, ","), ",")
		var last netip.Addr
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := parseHop(hops[i])
			if err != nil {
				return netip.Addr{}, err
			}
			if !s.isTrusted(a) {
				return a, nil
			}
			last = a
		}
		return last, nil
	}
	if v := r.Header.Get(hdrRealIP); v != "" {
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
			return netip.Addr{}, errorf(kindInvalidArgument, "forwarded client address %q is not an IP address", s)
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), nil
}
