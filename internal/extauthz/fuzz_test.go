package extauthz

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/genproto/googleapis/rpc/code"

	"github.com/policyrollout/reconciler/internal/api"
)

// FuzzCheck: whatever Envoy (or whoever reaches grpc_addr) sends, Check
// answers OK or PERMISSION_DENIED with the matching HTTP response, never an
// error or a panic.
func FuzzCheck(f *testing.F) {
	f.Add("GET", "/public/a?lang=de", "www.example", "198.51.100.9", "x-forwarded-for", "10.1.2.3", "web", "")
	f.Add("get", "::bad", "", "not an ip", ":authority", "x", "nope", "7")
	f.Add("DELETE", "/%zz?%zz", "H", "192.0.2.1", "x-forwarded-for", "garbage, 10.1.2.3", "web", "99999999999999999999999")
	f.Add("", "", "", "", "", "", "", "0")
	f.Add("GET", "/public%2F..%2Fadmin?lang=de", "www.example", "198.51.100.9", "", "", "web", "")
	f.Add("GET", `/public/..\admin`, "www.example", "198.51.100.9", "", "", "web", "")
	g := &gens{}
	g.set(7, testBundle(f))
	az := &authorization{az: api.New(api.Config{Generations: g, TrustedProxies: trusted})}
	f.Fuzz(func(t *testing.T, method, path, host, source, hk, hv, pol, gen string) {
		c := checkReq{method: method, path: path, host: host, source: source,
			headers: map[string]string{hk: hv}, ext: map[string]string{ExtPolicy: pol}}
		if gen != "" {
			c.ext[ExtGeneration] = gen
		}
		req := c.proto()
		// The raw form too (encode_raw_headers), repeated.
		raw := &corev3.HeaderValue{Key: hk, RawValue: []byte(hv)}
		req.Attributes.Request.Http.HeaderMap = &corev3.HeaderMap{Headers: []*corev3.HeaderValue{raw, raw}}
		r, err := az.Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetStatus().GetCode() {
		case int32(code.Code_OK):
			if r.GetOkResponse() == nil {
				t.Fatalf("OK without an OkResponse: %v", r)
			}
		case int32(code.Code_PERMISSION_DENIED):
			if r.GetDeniedResponse().GetStatus().GetCode() != 403 {
				t.Fatalf("denied without a 403: %v", r)
			}
		default:
			t.Fatalf("status %v", r.GetStatus())
		}
	})
}
