// Package engine compiles policies to CEL programs and evaluates decisions.
// It does no I/O: policies come in as policy.Policy values and requests as
// Request values; a compiled Bundle is immutable and safe for concurrent use.
package engine

import (
	"time"
)

// Request is the request schema of CONTRACT.md §1: the CEL variable
// `request` and the JSON body of a decision. JSON names are snake_case.
type Request struct {
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// RawPath is the path as the client sent it (percent-encoded, without
	// the query): in the gateway forms, what Path was read from
	// (GatewayPath); in the JSON form and policy tests, as given, else
	// Path.
	RawPath string `json:"raw_path,omitempty"`
	Host    string `json:"host,omitempty"`
	Scheme  string `json:"scheme,omitempty"`
	// Query and Headers are maps in CEL and JSON, a sorted list here
	// (pairs.go); header names are lower-cased.
	Query      Pairs          `json:"query,omitzero"`
	Headers    Pairs          `json:"headers,omitzero"`
	SourceIP   string         `json:"source_ip,omitempty"`
	Principal  string         `json:"principal,omitempty"`
	Groups     []string       `json:"groups,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	// Time is the request time; the receipt time when the body has none.
	Time time.Time `json:"time,omitzero"`
}

// Verdict is the outcome of a decision as the API spells it.
type Verdict string

// The verdicts.
const (
	Allow Verdict = "ALLOW"
	Deny  Verdict = "DENY"
)

// Decision is the answer for one request against one policy.
type Decision struct {
	Verdict Verdict `json:"decision"`
	// Rule is the name of the deciding rule; "" means the default action.
	Rule   string `json:"rule"`
	Policy string `json:"policy"` // resource name, "policies/{name}"
	Etag   string `json:"etag"`
	// Error is set when a rule's match failed at run time and on_error applied.
	Error string `json:"error,omitempty"`
}
