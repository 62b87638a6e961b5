package api

import (
	"bytes"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
)

// decodeBody decodes a decision request body receiveDecision read and
// fills the receipt time when the body has none. engine.DecodeRequest owns
// the schema: unknown fields, wrong types, bad addresses and attributes
// nested too deeply are its ErrBadRequest (400).
func (s *decisions) decodeBody(buf *bytes.Buffer, received time.Time) (*engine.Request, error) {
	data := bytes.TrimSpace(buf.Bytes())
	if len(data) == 0 {
		return nil, errorf(errs.InvalidArgument, "the request body is empty; send a JSON request object")
	}
	req, err := engine.DecodeRequestWithin(data, engine.Limits{MaxHeaders: s.maxHeaders})
	if err != nil {
		return nil, err
	}
	if req.Time.IsZero() {
		req.Time = received
	}
	return req, nil
}
