package extauthz

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/policyrollout/reconciler/internal/api"
)

// Context extensions (Envoy's per-route check_settings) that choose what a
// Check asks.
const (
	// ExtPolicy names the policy to decide with (required).
	ExtPolicy = "policy"
	// ExtGeneration pins the decision to a generation (optional).
	ExtGeneration = "generation"
)

// maxGenerationDigits bounds the generation extension before parsing.
const maxGenerationDigits = 20

// target is what a CheckRequest asks: which policy, in which generation.
type target struct {
	policy string
	gen    uint64 // 0: the active generation
}

// targetOf reads the policy and the generation from the context
// extensions. A generation that is not a number is the route's
// misconfiguration: the caller denies.
func targetOf(req *authv3.CheckRequest) (target, bool) {
	ext := req.GetAttributes().GetContextExtensions()
	t := target{policy: ext[ExtPolicy]}
	if g, ok := ext[ExtGeneration]; ok {
		if len(g) > maxGenerationDigits {
			return t, false
		}
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil || n == 0 {
			return t, false
		}
		t.gen = n
	}
	return t, true
}

// checkOf turns a CheckRequest's attributes into the GatewayCheck that the
// HTTP gateway form also builds, so both forms decide on the same request:
// method, path (Envoy's raw :path, decoded there), host, scheme, headers
// (pseudo-headers dropped, as HTTP has none) and the downstream address
// Envoy saw as the peer.
func checkOf(req *authv3.CheckRequest) *api.GatewayCheck {
	attrs := req.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	c := &api.GatewayCheck{
		Method: h.GetMethod(),
		URI:    h.GetPath(),
		Host:   h.GetHost(),
		TLS:    strings.EqualFold(h.GetScheme(), "https"),
		Header: headersOf(h),
	}
	if a, err := netip.ParseAddr(attrs.GetSource().GetAddress().GetSocketAddress().GetAddress()); err == nil {
		c.Peer = a.Unmap().WithZone("")
	}
	return c
}

// headersOf reads the headers map, or header_map when Envoy sends raw
// headers (encode_raw_headers), where a repeated name stays repeated.
func headersOf(h *authv3.AttributeContext_HttpRequest) http.Header {
	out := make(http.Header, len(h.GetHeaders()))
	for k, v := range h.GetHeaders() {
		if !strings.HasPrefix(k, ":") {
			out[http.CanonicalHeaderKey(k)] = []string{v}
		}
	}
	for _, hv := range h.GetHeaderMap().GetHeaders() {
		k := hv.GetKey()
		if strings.HasPrefix(k, ":") {
			continue
		}
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		k = http.CanonicalHeaderKey(k)
		out[k] = append(out[k], v)
	}
	return out
}
