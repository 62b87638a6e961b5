package api

import (
	"net/http"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
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
		if g, other := snap.Bundle.ServedElsewhere(name); other {
			return nil, errorf(errs.NotFound, "policy %q is served by the nodes of group %q; this node holds only its own group's policies",
				"policies/"+name, g)
		}
		return nil, errUnknownPolicy(name)
	}
	return cp, nil
}

// evaluate answers POST …/policies/{policy}:evaluate with the decision JSON.
func (s *decisions) evaluate(w http.ResponseWriter, r *http.Request, snap *Snapshot, name string) {
	start := time.Now()
	mode := s.mode()
	if refuses(mode) {
		s.fail(w, r, errPassive())
		return
	}
	received := start
	if !s.realClock {
		received = s.now()
	}
	cp, err := s.lookupServed(snap, name)
	if err != nil {
		s.evaluateUnknown(w, r, snap, name, err)
		return
	}
	body, ok := s.receiveDecisionAt(w, r, FormEvaluate, start)
	if !ok {
		return
	}
	defer s.doneDecision(body)
	req, err := s.decodeBody(body, received)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := cp.EvaluateDecoded(req, body.Len())
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
	s.offerDecoded(name, &d, req, body.Len()) // after the answer: preview never delays it
}
