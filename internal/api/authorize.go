package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// FailureMode is what a gateway form answers when the node cannot decide:
// no generation yet, an unknown policy, a pinned generation it does not
// keep. A gateway only understands allow and deny (nginx turns any other
// auth status into a 500), so the answer is one of them, chosen per node
// or per policy ([api] failure_mode, [api.failure_modes]).
type FailureMode uint8

// The failure modes; the zero value denies, like Envoy's
// failure_mode_allow = false.
const (
	FailureDeny FailureMode = iota
	FailureAllow
)

// ParseFailureMode parses "deny" or "allow".
func ParseFailureMode(s string) (FailureMode, bool) {
	switch s {
	case "deny":
		return FailureDeny, true
	case "allow":
		return FailureAllow, true
	}
	return FailureDeny, false
}

// FailureModes holds the node's failure mode and the per-policy ones.
type FailureModes struct {
	Default  FailureMode
	Policies map[string]FailureMode
}

func (f FailureModes) of(policy string) FailureMode {
	if m, ok := f.Policies[policy]; ok {
		return m
	}
	return f.Default
}

// GatewayAnswer is the answer to a gateway check: always an allow or a
// deny.
type GatewayAnswer struct {
	Allow bool
	// Decision is the policy's decision; zero when Error is set.
	Decision engine.Decision
	// Generation is the generation that answered, 0 when there was none.
	Generation uint64
	// Unenforced: the node is in TEST (monitor mode), so Allow is true
	// whatever Decision says; the headers say so (X-Policy-Enforced).
	Unenforced bool
	// Error, when set, says why the answer is not the policy's decision:
	// "STATUS: message", where STATUS is UNAVAILABLE or NOT_FOUND (the
	// failure mode answered) or INVALID_ARGUMENT (a malformed check: always
	// a deny, since its sender could choose to make it malformed).
	Error string

	policy string
	req    *engine.Request // set when the policy decided: offered to preview
	// shadowOnly: the policy is a new one only experiments know; req goes
	// to them as a mirrored request of snap (shadow.go).
	shadowOnly bool
	snap       *Snapshot
}

// maxErrorHeader bounds Error, which gateways pass on in a header.
const maxErrorHeader = 200

// Authorize answers a gateway check against policy in generation gen (0:
// the active one) and offers the decision to preview. The ext_authz gRPC
// service calls it; the HTTP form does the same with the offer after its
// answer is written.
func (s *decisions) Authorize(check *GatewayCheck, policy string, gen uint64) GatewayAnswer {
	a := s.decideGateway(check, policy, gen, gen != 0)
	s.offerGateway(&a)
	return a
}

// decideGateway is Authorize without the offer to preview; pinned says
// whether gen was asked for (the HTTP form can pin generation 0, which no
// node keeps).
func (s *decisions) decideGateway(check *GatewayCheck, policy string, gen uint64, pinned bool) GatewayAnswer {
	start := time.Now()
	received := s.now()
	mode := s.mode()
	if refuses(mode) { // PASSIVE: the failure mode answers, as when no generation is loaded
		return s.undecided(nil, errPassive(), s.failure.of(policy) == FailureAllow)
	}
	snap, err := s.gatewaySnapshot(gen, pinned)
	var cp *engine.CompiledPolicy
	if err == nil {
		cp, err = s.lookupServed(snap, policy)
	}
	if err != nil {
		a := s.undecided(snap, err, s.failure.of(policy) == FailureAllow)
		if !pinned {
			s.shadowUndecided(&a, snap, policy, func() (*engine.Request, error) {
				return s.buildGateway(check, received)
			})
		}
		return a
	}
	req, err := s.buildGateway(check, received)
	if err != nil {
		return s.undecided(snap, err, false)
	}
	d := cp.Evaluate(req)
	s.stats.count(&d)
	s.metrics.decided(policy, d.Verdict, time.Since(start))
	a := GatewayAnswer{Allow: d.Verdict == engine.Allow, Decision: d, Generation: snap.Generation, policy: policy, req: req}
	if mode == raftstore.NodeTest {
		a.Allow, a.Unenforced = true, true
		s.logUnenforced(policy, &d, snap.Generation)
	}
	return a
}

// gatewaySnapshot returns generation gen when pinned, else the active
// one, or why it cannot.
func (s *decisions) gatewaySnapshot(gen uint64, pinned bool) (*Snapshot, error) {
	cur := s.gens.Current()
	if cur == nil {
		return nil, errNoGeneration()
	}
	if !pinned {
		return cur, nil
	}
	if snap := s.gens.Get(gen); snap != nil {
		return snap, nil
	}
	return nil, s.errNotKept(gen, cur)
}

// undecided is the answer when the policy could not decide: allow or deny
// as told, with the reason.
func (s *decisions) undecided(snap *Snapshot, err error, allow bool) GatewayAnswer {
	v := classify(err)
	status, msg := v.code.String(), v.msg
	a := GatewayAnswer{Allow: allow, Error: headerSafe(status + ": " + msg)}
	if snap != nil {
		a.Generation = snap.Generation
	}
	answer := "deny"
	if allow {
		answer = "allow"
	}
	s.undecidedTotal.WithLabelValues(status, answer).Inc()
	if s.log.IsDebug() {
		s.log.Debug("gateway check undecided", "answer", answer, "error", msg)
	}
	return a
}

// offerGateway hands a decided check to preview.
func (s *decisions) offerGateway(a *GatewayAnswer) {
	switch {
	case a.req == nil:
	case a.shadowOnly:
		s.mirror.Mirror(a.snap, a.policy, a.req)
	default:
		s.offer(a.policy, &a.Decision, a.req)
	}
}

// headerSafe makes s fit in a header value: printable ASCII, bounded.
func headerSafe(s string) string {
	if len(s) > maxErrorHeader {
		s = s[:maxErrorHeader]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// newUndecidedCounter counts the gateway answers that were not a policy's
// decision. Its labels are bounded: a status name and allow/deny.
func newUndecidedCounter(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "reconciler", Name: "gateway_undecided_total",
		Help: "Gateway checks answered without a policy decision (failure mode or malformed check), by reason and answer.",
	}, []string{"status", "answer"})
	reg.MustRegister(c)
	return c
}

// authorize answers the HTTP gateway form, pinned to generation gen when
// pinned: 200 allow, 403 deny, the
// decision in headers and no body (Envoy passes a denial's body on to the
// client). It answers no other status (see FailureMode) but one: 503 with
// Retry-After when the node has its limit of decisions in flight, which
// the gateway handles as it would a node that is down (limits.go).
func (s *decisions) authorize(w http.ResponseWriter, r *http.Request, name, tail string, gen uint64, pinned bool) {
	if !s.admitDecision(w, r, FormAuthorize) {
		return
	}
	defer s.DoneDecision()
	a := s.decideGateway(checkOf(r, tail), name, gen, pinned)
	h := w.Header()
	if a.Error != "" {
		h.Set("X-Policy-Decision", string(verdictOf(a.Allow)))
		h.Set("X-Policy-Error", a.Error)
	} else {
		h.Set("X-Policy-Decision", string(verdictOf(a.Allow)))
		h.Set("X-Policy-Rule", a.Decision.Rule)
	}
	if a.Unenforced {
		h.Set("X-Policy-Enforced", "false")
		h.Set("X-Policy-Evaluated-Decision", string(a.Decision.Verdict))
	}
	if a.Generation != 0 {
		h.Set("X-Policy-Generation", strconv.FormatUint(a.Generation, 10))
	}
	h.Set("Content-Length", "0")
	if a.Allow {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusForbidden)
	}
	s.offerGateway(&a) // after the answer: preview never delays it
}

func verdictOf(allow bool) engine.Verdict {
	if allow {
		return engine.Allow
	}
	return engine.Deny
}
