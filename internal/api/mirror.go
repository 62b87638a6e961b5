package api

import (
	"net/http"

	"github.com/policyrollout/reconciler/internal/engine"
)

// mirrorRequest answers /v1/policies/{policy}:mirror[/{original path}]: the
// request is counted and handed to preview, never answered with a decision.
// It comes in one of two forms:
//   - the gateway form (nginx's mirror directive, which can only copy the
//     original request): any method, X-Original-Method or X-Original-URI
//     set or a path after ":mirror"; built by gatewayRequest exactly as on
//     :authorize, the body is ignored;
//   - otherwise the JSON form: POST with an :evaluate-style body.
func (s *decisions) mirrorRequest(w http.ResponseWriter, r *http.Request, snap *Snapshot, name, tail string) {
	gateway := isGatewayForm(r, tail)
	if !gateway && !s.allow(w, r, http.MethodPost) {
		return
	}
	if refuses(s.mode()) {
		s.fail(w, r, errPassive())
		return
	}
	received := s.now()
	if gateway {
		if !s.admitDecision(w, r, FormMirror) {
			return
		}
		defer s.DoneDecision()
	}
	if _, err := s.lookupServed(snap, name); err != nil && !(s.preview != nil && snap != nil && s.preview.Previewing(name)) {
		s.fail(w, r, err) // a policy not live yet is mirrored while it has ACTIVE experiments
		return
	}
	var req *engine.Request
	var err error
	if gateway {
		req, err = s.gatewayRequest(r, tail, received)
	} else {
		body, ok := s.receiveDecision(w, r, FormMirror)
		if !ok {
			return
		}
		defer s.doneDecision(body)
		req, err = s.decodeBody(body, received)
	}
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

// isGatewayForm reports whether r describes an original request in the
// gateway form (X-Original-* headers or a path suffix) rather than a JSON body.
func isGatewayForm(r *http.Request, tail string) bool {
	return tail != "" || r.Header.Get(hdrOriginalMethod) != "" || r.Header.Get(hdrOriginalURI) != ""
}
