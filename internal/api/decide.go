package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// lookup finds policy name in snap, or says why it cannot.
func lookup(snap *Snapshot, name string) (*engine.CompiledPolicy, error) {
	if snap == nil || snap.Bundle == nil {
		return nil, errNoGeneration()
	}
	if !validPolicyName(name) {
		return nil, errUnknownPolicy(name)
	}
	cp, ok := snap.Bundle.Policy(name)
	if !ok {
		return nil, errUnknownPolicy(name)
	}
	return cp, nil
}

// evaluate answers POST …/policies/{policy}:evaluate with the decision JSON.
func (s *Server) evaluate(w http.ResponseWriter, r *http.Request, snap *Snapshot, name string) {
	start := time.Now()
	mode := s.mode()
	if refuses(mode) {
		s.fail(w, r, errPassive())
		return
	}
	cp, err := s.lookupServed(snap, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := s.decodeRequest(w, r, s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := cp.Evaluate(req)
	s.stats.count(&d)
	if mode == raftstore.NodeTest {
		s.writeUnenforced(w, name, &d, snap.Generation)
	} else {
		buf := s.getBuf()
		buf.Write(appendDecision(buf.AvailableBuffer(), &d, snap.Generation))
		writeJSON(w, http.StatusOK, buf.Bytes())
		s.putBuf(buf)
	}
	s.metrics.decided(name, d.Verdict, time.Since(start))
	s.offer(name, &d, req) // after the answer: preview never delays it
}

// mirrorRequest answers POST /v1/policies/{policy}:mirror: the request is
// counted and handed to preview, never answered with a decision.
func (s *Server) mirrorRequest(w http.ResponseWriter, r *http.Request, snap *Snapshot, name string) {
	if _, err := lookup(snap, name); err != nil && !(s.preview != nil && snap != nil && s.preview.Previewing(name)) {
		s.fail(w, r, err) // a policy not live yet is mirrored while it has ACTIVE experiments
		return
	}
	req, err := s.decodeRequest(w, r, s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.mirrored(name)
	if s.mirror != nil {
		s.mirror.Mirror(snap, name, req)
	}
	w.WriteHeader(http.StatusNoContent)
}

// authorize answers the gateway form: 200 allow, 403 deny, the decision in
// headers and no body (Envoy passes a denial's body on to the client).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, snap *Snapshot, name, tail string) {
	start := time.Now()
	mode := s.mode()
	if refuses(mode) {
		s.fail(w, r, errPassive())
		return
	}
	cp, err := s.lookupServed(snap, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := s.gatewayRequest(r, tail, s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := cp.Evaluate(req)
	s.stats.count(&d)
	if mode == raftstore.NodeTest {
		s.authorizeUnenforced(w, name, &d, snap.Generation)
		s.metrics.decided(name, d.Verdict, time.Since(start))
		s.offer(name, &d, req)
		return
	}
	h := w.Header()
	h.Set("X-Policy-Decision", string(d.Verdict))
	h.Set("X-Policy-Rule", d.Rule)
	h.Set("X-Policy-Generation", strconv.FormatUint(snap.Generation, 10))
	h.Set("Content-Length", "0")
	if d.Verdict == engine.Allow {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusForbidden)
	}
	s.metrics.decided(name, d.Verdict, time.Since(start))
	s.offer(name, &d, req) // after the answer: preview never delays it
}
