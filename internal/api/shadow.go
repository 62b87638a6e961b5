package api

import (
	"net/http"

	"github.com/policyrollout/reconciler/internal/engine"
)

// previewsNew reports whether policy does not exist in snap but has ACTIVE
// experiments: a new policy previewed before it is merged. Its live
// answer stays what an unknown policy gets (404 on :evaluate, the failure
// mode on the gateway forms), and its experiments still see the request,
// compared with a live policy that allows everything, as on :mirror.
func (s *decisions) previewsNew(snap *Snapshot, policy string) bool {
	return s.preview != nil && s.mirror != nil && snap != nil && validPolicyName(policy) && s.preview.Previewing(policy)
}

// evaluateUnknown answers :evaluate for a policy that lookup refused with
// err, after reading the request for the policy's experiments when it is a
// previewed new one.
func (s *decisions) evaluateUnknown(w http.ResponseWriter, r *http.Request, snap *Snapshot, name string, err error) {
	if !s.previewsNew(snap, name) {
		s.fail(w, r, err)
		return
	}
	received := s.now()
	body, ok := s.receiveDecision(w, r, FormEvaluate)
	if !ok {
		return
	}
	defer s.doneDecision(body)
	req, derr := s.decodeBody(body, received)
	s.fail(w, r, err) // a malformed body still answers as an unknown policy
	if derr == nil {
		s.mirror.Mirror(snap, name, req) // after the answer: preview never delays it
	}
}

// shadowUndecided prepares a gateway answer for a previewed new policy:
// the request is built so that offerGateway hands it to the experiments.
func (s *decisions) shadowUndecided(a *GatewayAnswer, snap *Snapshot, policy string, req func() (*engine.Request, error)) {
	if !s.previewsNew(snap, policy) {
		return
	}
	if r, err := req(); err == nil {
		a.policy, a.req, a.shadowOnly, a.snap = policy, r, true, snap
	}
}
