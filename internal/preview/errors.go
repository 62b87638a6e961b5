package preview

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a google.rpc.Code: what kind of failure an experiment method
// had, which the API maps to an AIP-193 error body and HTTP status.
type Code int

// The codes the experiment methods return (google.rpc.Code numbers).
const (
	InvalidArgument    Code = 3
	NotFound           Code = 5
	AlreadyExists      Code = 6
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	Unavailable        Code = 14
)

// String returns the google.rpc.Code name, as AIP-193's `status` field
// spells it.
func (c Code) String() string {
	switch c {
	case InvalidArgument:
		return "INVALID_ARGUMENT"
	case NotFound:
		return "NOT_FOUND"
	case AlreadyExists:
		return "ALREADY_EXISTS"
	case ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case FailedPrecondition:
		return "FAILED_PRECONDITION"
	case Aborted:
		return "ABORTED"
	case Unavailable:
		return "UNAVAILABLE"
	}
	return fmt.Sprintf("CODE_%d", int(c))
}

// HTTPStatus is the HTTP status AIP-193 pairs with the code.
func (c Code) HTTPStatus() int {
	switch c {
	case InvalidArgument, FailedPrecondition:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case AlreadyExists, Aborted:
		return http.StatusConflict
	case ResourceExhausted:
		return http.StatusTooManyRequests
	case Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Error is a failed experiment method. Its message is meant for the
// client: it names the resource and says what to do next, and never holds
// request data.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

// Is makes errors.Is(err, preview.ErrNotFound) and the like match any
// error of the same code, whatever its message.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Msg == "" && t.Code == e.Code
}

// Sentinels for errors.Is: each matches every Error of its code.
var (
	ErrInvalidArgument    = &Error{Code: InvalidArgument}
	ErrNotFound           = &Error{Code: NotFound}
	ErrAlreadyExists      = &Error{Code: AlreadyExists}
	ErrResourceExhausted  = &Error{Code: ResourceExhausted}
	ErrFailedPrecondition = &Error{Code: FailedPrecondition}
	ErrAborted            = &Error{Code: Aborted}
)

func errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err, and false when err is not an *Error
// (an internal failure the API should answer with 500).
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}
