package api

import "github.com/policyrollout/reconciler/internal/engine"

// decodedOfferer is a Preview that takes a request with the length of the
// JSON body it was decoded from, so that it can keep the request without
// copying it (preview.Shadow.OfferDecoded). Optional: a Preview without
// it gets Offer.
type decodedOfferer interface {
	OfferDecoded(policy string, d engine.Decision, req *engine.Request, body int)
}

// offerDecoded is offer for a request decoded from a body of body bytes.
func (s *decisions) offerDecoded(name string, d *engine.Decision, req *engine.Request, body int) {
	if o, ok := s.preview.(decodedOfferer); ok {
		o.OfferDecoded(name, *d, req, body)
		return
	}
	s.offer(name, d, req)
}
