package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is one problem found in a policy file. The CLI prints it as
// `file:line: message` and the reconciler puts it in a policy's Invalid
// status condition, so it carries the place as data, not only as text.
type Error struct {
	// File is slash-separated and relative to the policies root (for Load),
	// or the name the caller gave (for MergeFiles).
	File string
	// Line is 1-based; 0 when the parser cannot tell.
	Line int
	// Rule is the name of the rule the problem is about, if any, so that
	// callers can attach it to that rule.
	Rule string
	// Msg is the complete human message; it already names the rule or test.
	Msg string
}

// Error renders `file:line: message`, or `file: message` without a line.
func (e *Error) Error() string {
	switch {
	case e.File == "":
		return e.Msg
	case e.Line <= 0:
		return e.File + ": " + e.Msg
	default:
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
}

// ErrorList is every problem found in one Load or merge. All problems are
// collected rather than stopping at the first, so that one `validate` run
// (or one pull-request status) shows the author everything to fix.
// Use errors.As with *ErrorList or *(*Error) to get at them.
type ErrorList []*Error

// Error renders one problem per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes each *Error to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns l as an error, or nil when l is empty; returning a nil
// ErrorList directly would give a non-nil error interface.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// errorSink collects problems for one file, or one merge, in order.
type errorSink struct {
	errs ErrorList
}

// add records a problem at file:line.
func (s *errorSink) add(file string, line int, rule, format string, args ...any) {
	s.errs = append(s.errs, &Error{File: file, Line: line, Rule: rule, Msg: fmt.Sprintf(format, args...)})
}

// addAll appends problems found elsewhere.
func (s *errorSink) addAll(l ErrorList) {
	s.errs = append(s.errs, l...)
}

// dedupe drops repeated problems, keeping the first. A broken shared file
// included by many policies would otherwise be reported once per policy.
func dedupe(l ErrorList) ErrorList {
	seen := make(map[Error]bool, len(l))
	out := l[:0:0]
	for _, e := range l {
		if seen[*e] {
			continue
		}
		seen[*e] = true
		out = append(out, e)
	}
	return out
}
