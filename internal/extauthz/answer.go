package extauthz

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/policyrollout/reconciler/internal/api"
)

// responseOf turns an answer into a CheckResponse: allow is OK with the
// x-policy-* headers on the request sent upstream and on the response to
// the client; deny is PERMISSION_DENIED with a 403 that carries them.
func responseOf(a api.GatewayAnswer) *authv3.CheckResponse {
	headers := policyHeaders(a)
	if a.Allow {
		return &authv3.CheckResponse{
			Status: &status.Status{Code: int32(code.Code_OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
				Headers:              headers,
				ResponseHeadersToAdd: headers,
			}},
		}
	}
	return &authv3.CheckResponse{
		Status: &status.Status{Code: int32(code.Code_PERMISSION_DENIED), Message: a.Error},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
			Headers: headers,
		}},
	}
}

// policyHeaders are the headers :authorize answers with, lower-cased.
func policyHeaders(a api.GatewayAnswer) []*corev3.HeaderValueOption {
	verdict := "DENY"
	if a.Allow {
		verdict = "ALLOW"
	}
	out := []*corev3.HeaderValueOption{header("x-policy-decision", verdict)}
	if a.Error != "" {
		out = append(out, header("x-policy-error", a.Error))
	} else {
		out = append(out, header("x-policy-rule", a.Decision.Rule))
	}
	if a.Generation != 0 {
		out = append(out, header("x-policy-generation", strconv.FormatUint(a.Generation, 10)))
	}
	if a.Unenforced {
		out = append(out, header("x-policy-enforced", "false"),
			header("x-policy-evaluated-decision", string(a.Decision.Verdict)))
	}
	return out
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:         &corev3.HeaderValue{Key: k, Value: v},
		AppendAction:   corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		KeepEmptyValue: true,
	}
}

// misconfigured is the deny for a route whose context extensions are
// wrong: the gateway's configuration, not a request, is at fault.
func misconfigured(msg string) *authv3.CheckResponse {
	return responseOf(api.GatewayAnswer{Error: "INVALID_ARGUMENT: " + msg})
}
