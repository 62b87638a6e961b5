// Package errs is the one error vocabulary of the project: a code from
// google.rpc.Code (AIP-193) that an error gets where it is made, and that
// the HTTP edge (internal/api/errors.go) maps to a status and body in one
// place. It is a leaf: every package may import it.
package errs

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a google.rpc.Code: what kind of failure an operation had, which
// the API maps to an AIP-193 error body and HTTP status.
type Code int

// The codes (google.rpc.Code numbers).
const (
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	Unauthenticated    Code = 16
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
	case Canceled:
		return "CANCELLED"
	case Unknown:
		return "UNKNOWN"
	case DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case PermissionDenied:
		return "PERMISSION_DENIED"
	case Unimplemented:
		return "UNIMPLEMENTED"
	case Internal:
		return "INTERNAL"
	case Unauthenticated:
		return "UNAUTHENTICATED"
	}
	return fmt.Sprintf("CODE_%d", int(c))
}

// ParseCode returns the code whose name (String) is s.
func ParseCode(s string) (Code, bool) {
	for c := Canceled; c <= Unauthenticated; c++ {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
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
	case Canceled:
		return 499 // client closed request, as google.rpc maps CANCELLED
	case DeadlineExceeded:
		return http.StatusGatewayTimeout
	case PermissionDenied:
		return http.StatusForbidden
	case Unimplemented:
		return http.StatusNotImplemented
	case Unauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// Error is an error with a code. Its message is meant for the client: it
// names the resource and says what to do next, and never holds request
// data. Err, when set, is the cause, kept for errors.Is and logs.
type Error struct {
	Code Code
	Msg  string
	Err  error
	// HTTP, when not 0, is the HTTP status where the code alone does not
	// give it (405 for a method, 413 for a body): set by the HTTP edge's
	// own errors (MethodNotAllowed, TooLarge).
	HTTP int
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrCode implements Coder.
func (e *Error) ErrCode() Code { return e.Code }

// HTTPStatus is the HTTP status of the answer: HTTP when set, else the
// code's.
func (e *Error) HTTPStatus() int {
	if e.HTTP != 0 {
		return e.HTTP
	}
	return e.Code.HTTPStatus()
}

// MethodNotAllowed refuses a method the resource does not have: 405,
// UNIMPLEMENTED.
func MethodNotAllowed(format string, args ...any) *Error {
	return &Error{Code: Unimplemented, Msg: fmt.Sprintf(format, args...), HTTP: http.StatusMethodNotAllowed}
}

// TooLarge refuses a body over its limit: 413, RESOURCE_EXHAUSTED.
func TooLarge(format string, args ...any) *Error {
	return &Error{Code: ResourceExhausted, Msg: fmt.Sprintf(format, args...), HTTP: http.StatusRequestEntityTooLarge}
}

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

// Errorf returns an *Error of code c; a %w verb in format keeps the
// cause for errors.Is.
func Errorf(c Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: c, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// Sentinel returns a sentinel error of code c with text msg: errors.Is
// matches it by identity (unlike the per-code sentinels above), and
// CodeOf finds c on every error that wraps it.
func Sentinel(c Code, msg string) error { return &coded{code: c, err: errors.New(msg)} }

// Coded gives err the code c without changing its text; errors.Is and
// errors.As still see err.
func Coded(c Code, err error) error { return &coded{code: c, err: err} }

type coded struct {
	code Code
	err  error
}

func (c *coded) Error() string { return c.err.Error() }

func (c *coded) Unwrap() error { return c.err }

// ErrCode implements Coder.
func (c *coded) ErrCode() Code { return c.code }

// Coder is an error that knows its code without being an *Error (the
// sentinels of other packages).
type Coder interface {
	ErrCode() Code
}

// CodeOf returns the code of err: that of the first Coder in its chain
// (errors.As order: outermost first, then each wrapped error in turn),
// and false when there is none (an internal failure the API answers with
// 500 and logs).
func CodeOf(err error) (Code, bool) {
	var c Coder
	if errors.As(err, &c) {
		return c.ErrCode(), true
	}
	return 0, false
}
