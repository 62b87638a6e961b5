package preview

import "github.com/policyrollout/reconciler/internal/errs"

// Code and Error are the project's one error vocabulary (internal/errs);
// the experiment methods answer with them.
type (
	Code  = errs.Code
	Error = errs.Error
)

// The codes the experiment methods return.
const (
	InvalidArgument    = errs.InvalidArgument
	NotFound           = errs.NotFound
	AlreadyExists      = errs.AlreadyExists
	ResourceExhausted  = errs.ResourceExhausted
	FailedPrecondition = errs.FailedPrecondition
	Aborted            = errs.Aborted
	Unavailable        = errs.Unavailable
)

// Sentinels for errors.Is: each matches every Error of its code.
var (
	ErrInvalidArgument    = errs.ErrInvalidArgument
	ErrNotFound           = errs.ErrNotFound
	ErrAlreadyExists      = errs.ErrAlreadyExists
	ErrResourceExhausted  = errs.ErrResourceExhausted
	ErrFailedPrecondition = errs.ErrFailedPrecondition
	ErrAborted            = errs.ErrAborted
)

// CodeOf returns the code of err (errs.CodeOf).
func CodeOf(err error) (Code, bool) { return errs.CodeOf(err) }

func errorf(c Code, format string, args ...any) *Error { return errs.Errorf(c, format, args...) }
