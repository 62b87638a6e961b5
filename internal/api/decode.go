package api

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
)

// decodeRequest reads a decision request body (bounded by MaxBodyBytes)
// through a pooled buffer and fills the receipt time when the body has none.
// engine.DecodeRequest owns the schema: unknown fields, wrong types, bad
// addresses and attributes nested too deeply are its ErrBadRequest (400).
func (s *Server) decodeRequest(w http.ResponseWriter, r *http.Request, received time.Time) (*engine.Request, error) {
	if r.ContentLength > s.maxBody {
		return nil, &http.MaxBytesError{Limit: s.maxBody}
	}
	buf := s.getBuf()
	defer s.putBuf(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.maxBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, errorf(errs.InvalidArgument, "reading the request body: %v", err)
	}
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
