package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/jsonenc"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
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
	kindFailedPrecondition
	kindAlreadyExists
	kindUnauthenticated
	// Experiments (AIP-236): stale etags and the cap.
	kindAborted
	kindResourceExhausted
	// The API's guards (auth.go, origin.go): a role too small, a foreign
	// origin or Host, a write that is not JSON.
	kindPermissionDenied
	kindUnsupportedMediaType
	kindLast = kindUnsupportedMediaType
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
// the real one. An error another node answered with (forwarded writes)
// keeps the status that node gave it.
func classify(err error) (k kind, msg string) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	var remote *cluster.RemoteError
	switch {
	case errors.As(err, &ae):
		return ae.kind, ae.msg
	case errors.As(err, &tooBig):
		return kindTooLarge, "request body is larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"
	case errors.As(err, &remote):
		return kindOfStatus(remote.Status), remote.Message
	case errors.As(err, new(*preview.Error)):
		return previewKind(err)
	case errors.Is(err, engine.ErrUnknownPolicy):
		return kindNotFound, err.Error()
	case errors.Is(err, engine.ErrBadRequest):
		return kindInvalidArgument, err.Error()
	}
	if k, ok := clusterKind(err); ok {
		return k, err.Error()
	}
	return kindInternal, "internal error"
}

// clusterKinds maps the sentinel errors of the cluster, raftstore, the
// leader loop and the git source, most specific first (the rejection kinds
// wrap raftstore.ErrRejected).
var clusterKinds = []struct {
	err  error
	kind kind
}{
	{raftstore.ErrNotLeader, kindUnavailable},
	{raftstore.ErrLeadershipLost, kindUnavailable},
	{cluster.ErrForward, kindUnavailable},
	{raftstore.ErrMembership, kindAlreadyExists},
	{cluster.ErrRaftUnreachable, kindFailedPrecondition},
	{cluster.ErrLastVoter, kindFailedPrecondition},
	{cluster.ErrBadRequest, kindInvalidArgument},
	{cluster.ErrNotPeer, kindPermissionDenied},
	{cluster.ErrNotForwardable, kindInvalidArgument},
	{raftstore.ErrInvalidCommand, kindInvalidArgument},
	{raftstore.ErrUnknownCommand, kindInvalidArgument},
	{raftstore.ErrUnknownGeneration, kindNotFound},
	{raftstore.ErrUnknownNode, kindNotFound},
	{raftstore.ErrTooLarge, kindFailedPrecondition},
	{raftstore.ErrNodeState, kindFailedPrecondition},
	{raftstore.ErrGenerationState, kindFailedPrecondition},
	{raftstore.ErrGenerationNotNewer, kindFailedPrecondition},
	{raftstore.ErrRejected, kindFailedPrecondition},
	// Rollback: a target that cannot be restored, a refused push, a
	// repository that cannot be reached.
	{reconcile.ErrCannotRollBack, kindFailedPrecondition},
	{gitsource.ErrPushRefused, kindFailedPrecondition},
	{gitsource.ErrNoChange, kindFailedPrecondition},
	{gitsource.ErrUnknownRevision, kindFailedPrecondition},
	{gitsource.ErrPull, kindUnavailable},
	{gitsource.ErrPush, kindUnavailable},
}

func clusterKind(err error) (kind, bool) {
	for _, c := range clusterKinds {
		if errors.Is(err, c.err) {
			return c.kind, true
		}
	}
	return kindInternal, false
}

// kindOfStatus maps an AIP-193 status name back to its kind.
func kindOfStatus(status string) kind {
	for k := kindInternal; k <= kindLast; k++ {
		if _, s := k.httpStatus(); s == status {
			return k
		}
	}
	return kindInternal
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
	case kindFailedPrecondition:
		return http.StatusBadRequest, "FAILED_PRECONDITION"
	case kindAlreadyExists:
		return http.StatusConflict, "ALREADY_EXISTS"
	case kindUnauthenticated:
		return http.StatusUnauthorized, "UNAUTHENTICATED"
	case kindAborted:
		return http.StatusConflict, "ABORTED"
	case kindResourceExhausted:
		return http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"
	case kindPermissionDenied:
		return http.StatusForbidden, "PERMISSION_DENIED"
	case kindUnsupportedMediaType:
		return http.StatusUnsupportedMediaType, "INVALID_ARGUMENT"
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
	reason := ""
	if k != kindInternal {
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

// previewKind maps an experiment method's error (internal/preview) to the
// kind with the same google.rpc.Code.
func previewKind(err error) (kind, string) {
	var pe *preview.Error
	errors.As(err, &pe)
	switch pe.Code {
	case preview.InvalidArgument:
		return kindInvalidArgument, pe.Msg
	case preview.NotFound:
		return kindNotFound, pe.Msg
	case preview.AlreadyExists:
		return kindAlreadyExists, pe.Msg
	case preview.ResourceExhausted:
		return kindResourceExhausted, pe.Msg
	case preview.FailedPrecondition:
		return kindFailedPrecondition, pe.Msg
	case preview.Aborted:
		return kindAborted, pe.Msg
	}
	return kindInternal, "internal error"
}
