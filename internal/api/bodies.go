package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/errs"
)

// A decision's body is read before the decision takes its in-flight slot
// (limits.go): a slot held while a client trickles its body let 128 idle
// connections refuse every decision on the node. Bodies being read are
// bounded on their own, so that neither slow bodies nor memory take the
// decisions down (docs/security.md):
//   - a read deadline: a gateway or service sends its body in
//     milliseconds; one still arriving after DefaultDecisionBodyTimeout
//     is answered 408;
//   - a per-source cap: one address (an IPv6 /64) reads at most
//     MaxDecisionBodiesPerSource bodies at once, past it 503;
//   - a budget of body bytes buffered for all decisions, taken as the
//     bytes arrive (a Content-Length costs nothing until it is sent) and
//     given back when the decision is done; past it 503.
const (
	// DefaultDecisionBodyTimeout bounds the time a decision body may take
	// to arrive when Config.DecisionBodyTimeout is 0.
	DefaultDecisionBodyTimeout = 5 * time.Second
	// DefaultMaxDecisionBodiesPerSource bounds the decision bodies one
	// source address sends at once when Config.MaxDecisionBodiesPerSource
	// is 0.
	DefaultMaxDecisionBodiesPerSource = 32
	// minDecisionBodyBudget is the least budget of decision body bytes
	// buffered; it is at least 4 bodies of max_body_bytes.
	minDecisionBodyBudget = 64 << 20
)

// The reasons a decision is shed, the reason label of
// reconciler_decisions_shed_total.
const (
	shedInFlight    = "in_flight"
	shedBodyBudget  = "body_budget"
	shedSource      = "source_bodies"
	shedBodyTimeout = "body_timeout"
)

// bodyGate bounds the decision bodies being read and buffered.
type bodyGate struct {
	buffered  atomic.Int64 // body bytes held, read or being read
	budget    int64
	timeout   time.Duration
	perSource int32

	mu      sync.Mutex
	reading map[netip.Addr]int32 // bodies being read, by source
	total   atomic.Int64         // the sum of reading
}

func newBodyGate(reg *prometheus.Registry, cfg Config, maxBody int64) *bodyGate {
	g := &bodyGate{budget: cfg.DecisionBodyBudget, timeout: cfg.DecisionBodyTimeout,
		perSource: int32(cfg.MaxDecisionBodiesPerSource), reading: map[netip.Addr]int32{}}
	if g.budget <= 0 {
		g.budget = max(minDecisionBodyBudget, 4*maxBody)
	}
	if g.timeout <= 0 {
		g.timeout = DefaultDecisionBodyTimeout
	}
	if g.perSource <= 0 {
		g.perSource = DefaultMaxDecisionBodiesPerSource
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "reconciler", Name: "decision_body_bytes",
		Help: "Bytes of decision request bodies held by the node, read or being read.",
	}, func() float64 { return float64(g.buffered.Load()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "reconciler", Name: "decision_bodies_reading",
		Help: "Decision request bodies being read now, before their decision is in flight.",
	}, func() float64 { return float64(g.total.Load()) }))
	return g
}

// enter counts a body from src being read, or reports false when src
// already sends perSource of them.
func (g *bodyGate) enter(src netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.reading[src]
	if n >= g.perSource {
		return false
	}
	g.reading[src] = n + 1
	g.total.Add(1)
	return true
}

// leave ends what enter began; sources no longer reading leave the map,
// so that it holds only the bodies being read.
func (g *bodyGate) leave(src netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.reading[src] - 1; n > 0 {
		g.reading[src] = n
	} else {
		delete(g.reading, src)
	}
	g.total.Add(-1)
}

// ReceivingDecision counts a decision message from peer being received
// (an ext_authz Check's, which gRPC delivers inside the handler), within
// the per-source cap of decision bodies; past it, it counts a shed
// decision of form and reports false. Every true is followed by one
// ReceivedDecision(peer).
func (s *decisions) ReceivingDecision(form string, peer netip.Addr) bool {
	if s.bodies.enter(sourceKey(peer)) {
		return true
	}
	s.inflight.shed.WithLabelValues(form, shedSource).Inc()
	return false
}

// ReceivedDecision ends what ReceivingDecision began.
func (s *decisions) ReceivedDecision(peer netip.Addr) { s.bodies.leave(sourceKey(peer)) }

// MaxDecisionBodiesPerSource is the per-source cap, for error messages.
func (s *decisions) MaxDecisionBodiesPerSource() int { return int(s.bodies.perSource) }

// sourceOf is the per-source key of a remote address: the IPv4 address,
// or the /64 of an IPv6 one (what one host is given).
func sourceOf(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{} // not an IP peer: one shared source
	}
	return sourceKey(ap.Addr())
}

// sourceKey is sourceOf for an address.
func sourceKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// errBudget is a body refused for the budget of body bytes.
var errBudget = errors.New("decision body budget exhausted")

// fill reads body into buf, taking every byte from the budget as it
// arrives; charged is what it took, also on an error. Past limit bytes it
// fails with http.MaxBytesError, having read at most one byte more, as
// http.MaxBytesReader would (which cost an allocation per decision).
func (g *bodyGate) fill(buf *bytes.Buffer, body io.Reader, limit int64) (charged int64, err error) {
	for {
		buf.Grow(bytes.MinRead)
		p := buf.AvailableBuffer()
		p = p[:min(int64(cap(p)), limit-int64(buf.Len())+1)]
		n, err := body.Read(p)
		if n > 0 {
			buf.Write(p[:n]) // onto itself: the bytes are already in place
			charged += int64(n)
			if g.buffered.Add(int64(n)) > g.budget {
				return charged, errBudget
			}
			if int64(buf.Len()) > limit {
				return charged, &http.MaxBytesError{Limit: limit}
			}
		}
		if err == io.EOF {
			return charged, nil
		}
		if err != nil {
			return charged, err
		}
	}
}

// setReadDeadline sets the read deadline of w's connection (of its stream
// in HTTP/2). The net/http writers have the method; asking them directly
// spares the hot path the ResponseController and its error for a writer
// without one (a recorder).
func setReadDeadline(w http.ResponseWriter, t time.Time) {
	if d, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(t)
	} else if _, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
		_ = http.NewResponseController(w).SetReadDeadline(t)
	}
}

// receiveDecision reads a decision body within the body limits, then takes
// a decision slot. On false it has answered; a true is followed by one
// doneDecision(buf).
func (s *decisions) receiveDecision(w http.ResponseWriter, r *http.Request, form string) (*bytes.Buffer, bool) {
	return s.receiveDecisionAt(w, r, form, time.Now())
}

// receiveDecisionAt is receiveDecision for a request whose handler read
// the clock at now (a clock read per decision is about 50 ns).
func (s *decisions) receiveDecisionAt(w http.ResponseWriter, r *http.Request, form string, now time.Time) (*bytes.Buffer, bool) {
	buf, err := s.readDecisionBody(w, r, now)
	if err != nil {
		s.refuseBody(w, r, form, err)
		return nil, false
	}
	if !s.admitDecision(w, r, form) {
		s.releaseBody(buf)
		return nil, false
	}
	return buf, true
}

// doneDecision gives back the slot and the body receiveDecision took.
func (s *decisions) doneDecision(buf *bytes.Buffer) {
	s.DoneDecision()
	s.releaseBody(buf)
}

// readDecisionBody reads r's body into a pooled buffer whose bytes are charged to
// the budget until releaseBody; its deadline runs from now.
func (s *decisions) readDecisionBody(w http.ResponseWriter, r *http.Request, now time.Time) (*bytes.Buffer, error) {
	if r.ContentLength > s.maxBody {
		return nil, &http.MaxBytesError{Limit: s.maxBody}
	}
	src := sourceOf(r.RemoteAddr)
	if !s.bodies.enter(src) {
		return nil, errSourceBodies
	}
	defer s.bodies.leave(src)
	setReadDeadline(w, now.Add(s.bodies.timeout))
	buf := s.getBuf()
	if charged, err := s.bodies.fill(buf, r.Body, s.maxBody); err != nil {
		s.bodies.buffered.Add(-charged)
		s.putBuf(buf)
		return nil, err // the deadline stays: the server reads no more of this body
	}
	setReadDeadline(w, time.Time{}) // the body is in: no late timeout cancels the request
	return buf, nil
}

// releaseBody gives back a buffer readDecisionBody filled, and its bytes.
func (s *decisions) releaseBody(buf *bytes.Buffer) {
	s.bodies.buffered.Add(-int64(buf.Len()))
	s.putBuf(buf)
}

// errSourceBodies is a body refused for the per-source cap.
var errSourceBodies = errors.New("too many decision bodies from one source")

// refuseBody answers a body readDecisionBody could not read, and closes
// the connection: 503 with Retry-After past a bound, 408 past the
// deadline (each counted as shed), 413 over max_body_bytes, else 400.
func (s *decisions) refuseBody(w http.ResponseWriter, r *http.Request, form string, err error) {
	// The rest of a refused body is not waited for: without this the
	// server reads up to 256 KiB of it before it answers.
	w.Header().Set("Connection", "close")
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.fail(w, r, err)
		return
	case errors.Is(err, errSourceBodies):
		s.inflight.shed.WithLabelValues(form, shedSource).Inc()
		w.Header().Set("Retry-After", retryAfterSeconds)
		err = errorf(errs.Unavailable, "this address is sending its limit of %d decision bodies at once ([api] max_decision_bodies_per_source); retry shortly", s.bodies.perSource)
	case errors.Is(err, errBudget):
		s.inflight.shed.WithLabelValues(form, shedBodyBudget).Inc()
		w.Header().Set("Retry-After", retryAfterSeconds)
		err = errorf(errs.Unavailable, "this node holds its limit of %d bytes of decision bodies; retry shortly or on another node", s.bodies.budget)
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.inflight.shed.WithLabelValues(form, shedBodyTimeout).Inc()
		err = &errs.Error{Code: errs.DeadlineExceeded, HTTP: http.StatusRequestTimeout,
			Msg: "the request body did not arrive within " + s.bodies.timeout.String() + "; a decision body is sent at once"}
	default:
		err = errorf(errs.InvalidArgument, "reading the request body: %v", err)
	}
	s.fail(w, r, err)
}
