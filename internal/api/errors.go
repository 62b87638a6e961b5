package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/engine"
)

// kind is what went wrong, as the client should understand it.
type kind int

// The error kinds the API answers with.
const (
	kindInternal kind = iota
	kindInvalidArgument
	kindNotFound
	kindMethodNotAllowed
	kindTooLarge
	kindUnavailable
)

// apiError is an error whose message is safe to show to the client.
type apiError struct {
	kind kind
	msg  string
}

func (e *apiError) Error() string { return e.msg }

// errorf returns an error of kind k with a message for the client.
func errorf(k kind, format string, args ...any) error {
	return &apiError{kind: k, msg: fmt.Sprintf(format, args...)}
}

func errNoGeneration() error {
	return errorf(kindUnavailable, "no policy generation is loaded on this node yet")
}

func errUnknownPolicy(name string) error {
	return errorf(kindNotFound, "policy %q not found", "policies/"+name)
}

// classify is the one place that maps errors to what the client sees: the
// HTTP code, the google.rpc.Code name and a message. Errors it does not
// know are internal: the client gets a generic message and the caller logs
// the real one.
func classify(err error) (k kind, msg string) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.kind, ae.msg
	case errors.As(err, &tooBig):
		return kindTooLarge, "request body is larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"
	case errors.Is(err, engine.ErrUnknownPolicy):
		return kindNotFound, err.Error()
	case errors.Is(err, engine.ErrBadRequest):
		return kindInvalidArgument, err.Error()
	default:
		return kindInternal, "internal error"
	}
}

// httpStatus returns the HTTP code and AIP-193 status name of a kind.
func (k kind) httpStatus() (int, string) {
	switch k {
	case kindInvalidArgument:
		return http.StatusBadRequest, "INVALID_ARGUMENT"
	case kindNotFound:
		return http.StatusNotFound, "NOT_FOUND"
	case kindMethodNotAllowed:
		return http.StatusMethodNotAllowed, "UNIMPLEMENTED"
	case kindTooLarge:
		return http.StatusRequestEntityTooLarge, "RESOURCE_EXHAUSTED"
	case kindUnavailable:
		return http.StatusServiceUnavailable, "UNAVAILABLE"
	default:
		return http.StatusInternalServerError, "INTERNAL"
	}
}

// fail writes err as an AIP-193 body, counts it, and logs internal errors
// (the only place the API logs them).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	k, msg := classify(err)
	code, status := k.httpStatus()
	if k == kindInternal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	} else if s.log.IsDebug() {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "code", code, "error", msg)
	}
	s.metrics.httpError(code)
	writeError(w, code, status, msg)
}

// writeError writes {"error":{"code":N,"status":"...","message":"..."}}.
func writeError(w http.ResponseWriter, code int, status, msg string) {
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, status)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, "}}\n"...)
	writeJSON(w, code, b)
}

// recoverPanic turns a handler panic into a 500. http.ErrAbortHandler is
// re-raised: it is net/http's way to abort a response on purpose.
func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.fail(w, r, fmt.Errorf("panic: %v", v))
}
