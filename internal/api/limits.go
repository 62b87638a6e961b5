package api

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
)

// DefaultMaxDecisionsInFlight bounds the decisions a node works on at once
// when Config.MaxDecisionsInFlight is 0. A decision takes microseconds, so
// even hundreds of thousands a second keep far fewer in flight; what the
// bound stops is many large bodies decoded at once (1 MiB each at most),
// which without it took a node to 1.76 GB. A slot is taken once the body
// is in (bodies.go bounds the reading), so a slow client holds none.
const DefaultMaxDecisionsInFlight = 128

// retryAfterSeconds is the Retry-After of a decision refused for load:
// the decisions in flight finish long before.
const retryAfterSeconds = "1"

// The decision forms, the label values of reconciler_decisions_shed_total.
const (
	FormEvaluate  = "evaluate"
	FormAuthorize = "authorize"
	FormMirror    = "mirror"
	// FormCheck is the Envoy ext_authz gRPC Check (internal/extauthz).
	FormCheck = "check"
)

// inFlight counts the decisions being worked on and refuses past max.
type inFlight struct {
	n    atomic.Int64
	max  int64
	shed *prometheus.CounterVec
}

func newInFlight(reg *prometheus.Registry, limit int) *inFlight {
	if limit <= 0 {
		limit = DefaultMaxDecisionsInFlight
	}
	l := &inFlight{max: int64(limit), shed: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "reconciler", Name: "decisions_shed_total",
		Help: "Decision requests refused for load, by form and reason (in_flight, body_budget, source_bodies, body_timeout).",
	}, []string{"form", "reason"})}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "reconciler", Name: "decisions_in_flight",
		Help: "Decision requests being worked on now: decoded and evaluated, their bodies already read.",
	}, func() float64 { return float64(l.n.Load()) })
	reg.MustRegister(l.shed, gauge)
	for _, f := range []string{FormEvaluate, FormAuthorize, FormMirror, FormCheck} {
		l.shed.WithLabelValues(f, shedInFlight) // every form shows from the start, at 0
	}
	for _, f := range []string{FormEvaluate, FormMirror} { // the forms with a body
		for _, reason := range []string{shedBodyBudget, shedSource, shedBodyTimeout} {
			l.shed.WithLabelValues(f, reason)
		}
	}
	l.shed.WithLabelValues(FormCheck, shedSource)
	return l
}

// AdmitDecision takes one of the node's decision slots for a decision of
// form (one of the Form constants), or counts a shed decision and reports
// false when all are taken. Every true must be followed by one
// DoneDecision. The ext_authz gRPC server calls it before it decodes a
// Check (gRPC has received the whole message by then), as the HTTP forms
// do once their body is read.
func (s *decisions) AdmitDecision(form string) bool {
	if s.inflight.n.Add(1) <= s.inflight.max {
		return true
	}
	s.inflight.n.Add(-1)
	s.inflight.shed.WithLabelValues(form, shedInFlight).Inc()
	return false
}

// DoneDecision gives back a slot AdmitDecision took.
func (s *decisions) DoneDecision() { s.inflight.n.Add(-1) }

// MaxDecisionsInFlight is the node's bound on decisions in flight.
func (s *decisions) MaxDecisionsInFlight() int { return int(s.inflight.max) }

// admitDecision is AdmitDecision for the HTTP forms: when full it answers 503
// UNAVAILABLE with Retry-After, which a gateway treats as its own
// failure (Envoy's failure_mode_allow and status_on_error; nginx a 500).
func (s *decisions) admitDecision(w http.ResponseWriter, r *http.Request, form string) bool {
	if s.AdmitDecision(form) {
		return true
	}
	w.Header().Set("Retry-After", retryAfterSeconds)
	s.fail(w, r, ErrOverloaded(s.MaxDecisionsInFlight()))
	return false
}

// ErrOverloaded is the error of a decision refused because max decisions
// were in flight (UNAVAILABLE: retry shortly, or on another node).
func ErrOverloaded(max int) error {
	return errorf(errs.Unavailable, "this node is working on its limit of %d decisions ([api] max_decisions_in_flight); retry shortly or on another node", max)
}

// buildGateway is BuildGatewayRequest with the node's options, after the
// header cap: a check over it is malformed (INVALID_ARGUMENT), and the
// message gives the count, never a header. Headers count by name, as the request a policy sees
// has them (the values of a repeated name are joined into one): len is
// free, where counting values walks the map on every decision, and the
// values of one name are bounded by the bytes of the check (64 KiB of
// HTTP headers, a 1 MiB CheckRequest).
func (s *decisions) buildGateway(check *GatewayCheck, received time.Time) (*engine.Request, error) {
	if n := len(check.Header); n > s.maxHeaders {
		return nil, errorf(errs.InvalidArgument, "the request has %d headers, over the limit of %d ([api] max_request_headers)", n, s.maxHeaders)
	}
	return BuildGatewayRequest(check, GatewayOptions{Trusted: s.trusted, Slashes: s.slashes}, received)
}
