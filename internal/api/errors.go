package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/jsonenc"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// errorf returns an error of code c with a message for the client.
func errorf(c errs.Code, format string, args ...any) error {
	return errs.Errorf(c, format, args...)
}

// errMethod refuses a method the resource does not have (405).
func errMethod(format string, args ...any) error {
	return errs.MethodNotAllowed(format, args...)
}

// errUnsupportedMedia refuses a write that is not JSON (415,
// INVALID_ARGUMENT).
func errUnsupportedMedia(format string, args ...any) error {
	return &errs.Error{Code: errs.InvalidArgument, Msg: fmt.Sprintf(format, args...), HTTP: http.StatusUnsupportedMediaType}
}

func errNoGeneration() error {
	return errorf(errs.Unavailable, "no policy generation is loaded on this node yet")
}

func errUnknownPolicy(name string) error {
	return errorf(errs.NotFound, "policy %q not found", "policies/"+name)
}

// verdict is what the client sees of an error: the HTTP status, the
// google.rpc.Code and a message.
type verdict struct {
	http int
	code errs.Code
	msg  string
}

// classify is the one place that maps errors to what the client sees.
// Errors carry their code from where they were made (internal/errs); this
// maps the code to its HTTP status (AIP-193). An error another node
// answered with (forwarded writes) keeps the status that node gave it.
// Errors without a code are internal: the client gets a generic message
// and the caller logs the real one.
func classify(err error) verdict {
	var tooBig *http.MaxBytesError
	var remote *cluster.RemoteError
	var e *errs.Error
	switch {
	case errors.As(err, &tooBig):
		return classify(errs.TooLarge("request body is larger than %d bytes", tooBig.Limit))
	case errors.As(err, &remote):
		return remoteAnswer(remote)
	}
	c, ok := errs.CodeOf(err)
	if !ok {
		c, ok = foreignCode(err)
	}
	if !ok || c == errs.Internal {
		return verdict{http.StatusInternalServerError, errs.Internal, "internal error"}
	}
	if errors.As(err, &e) && e.Code == c {
		return verdict{e.HTTPStatus(), c, e.Msg} // the client's message, without the code's name
	}
	return verdict{c.HTTPStatus(), c, err.Error()}
}

// foreignCode codes the errors that cannot carry one: hashicorp/raft's
// (raftstore.ErrNotLeader, ErrLeadershipLost) and a state machine
// rejection whose kind has none.
func foreignCode(err error) (errs.Code, bool) {
	switch {
	case errors.Is(err, raftstore.ErrNotLeader), errors.Is(err, raftstore.ErrLeadershipLost):
		return errs.Unavailable, true
	case errors.Is(err, raftstore.ErrRejected):
		return errs.FailedPrecondition, true
	}
	return 0, false
}

// remoteAnswer is the verdict another node gave, as it gave it.
func remoteAnswer(r *cluster.RemoteError) verdict {
	c, ok := errs.ParseCode(r.Status)
	if !ok || r.Code < 400 || r.Code > 599 {
		return verdict{http.StatusInternalServerError, errs.Internal, "internal error"}
	}
	return verdict{r.Code, c, r.Message}
}

// fail writes err as an AIP-193 body, counts it, and logs internal errors
// (the only place the API logs them).
func (s *core) fail(w http.ResponseWriter, r *http.Request, err error) {
	if s.redirectToLeader(w, r, err) {
		return
	}
	a := classify(err)
	code, status, msg := a.http, a.code.String(), a.msg
	if a.code == errs.Internal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	} else if s.log.IsDebug() {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "code", code, "error", msg)
	}
	s.metrics.httpError(code)
	reason := ""
	if a.code != errs.Internal {
		reason = cluster.Reason(err)
	}
	writeError(w, code, status, msg, reason)
}

// writeError writes {"error":{"code":N,"status":"...","message":"..."}},
// plus a google.rpc.ErrorInfo detail when the error has a wire name, so
// that a node that forwarded the request recognises the error (see
// cluster.Reason).
func writeError(w http.ResponseWriter, code int, status, msg, reason string) {
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"status":`...)
	b = jsonenc.AppendString(b, status)
	b = append(b, `,"message":`...)
	b = jsonenc.AppendString(b, msg)
	if reason != "" {
		b = append(b, `,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":`...)
		b = jsonenc.AppendString(b, reason)
		b = append(b, `,"domain":`...)
		b = jsonenc.AppendString(b, cluster.ErrorDomain)
		b = append(b, "}]"...)
	}
	b = append(b, "}}\n"...)
	writeJSON(w, code, b)
}

// recoverPanic turns a handler panic into a 500. http.ErrAbortHandler is
// re-raised: it is net/http's way to abort a response on purpose.
func (s *core) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.fail(w, r, fmt.Errorf("panic: %v", v))
}
