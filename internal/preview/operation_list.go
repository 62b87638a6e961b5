package preview

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// OperationsParent is the collection of the long-running operations, and
// the parent their page tokens are bound to.
const OperationsParent = "operations"

// The fields an operations filter may compare (ParseOperationFilter).
const (
	opFieldDone   = "done"
	opFieldTarget = "metadata.target"
	opFieldVerb   = "metadata.verb"
)

// OperationFilter selects operations; the zero value selects all.
type OperationFilter struct {
	// Done is "", "true" or "false".
	Done   string
	Target string
	Verb   string
}

// ParseOperationFilter parses the filter of ListOperations (AIP-160
// subset): `done = true|false`, `metadata.target = "policies/p/experiments/e"`
// and `metadata.verb = commit` (a Method), joined by AND.
func ParseOperationFilter(s string) (OperationFilter, error) {
	terms, err := ParseComparisons(s, opFieldDone, opFieldTarget, opFieldVerb)
	if err != nil {
		return OperationFilter{}, err
	}
	var f OperationFilter
	for _, t := range terms {
		v := Unquote(t.Value)
		switch t.Field {
		case opFieldDone:
			if v != "true" && v != "false" {
				return OperationFilter{}, errorf(InvalidArgument, "filter: done must be true or false, not %q", v)
			}
			f.Done = v
		case opFieldTarget:
			f.Target = v
		case opFieldVerb:
			if !knownMethod(Method(v)) {
				return OperationFilter{}, errorf(InvalidArgument,
					"filter: metadata.verb %q is not one of create, update, delete, startPreview, stopPreview, commit", v)
			}
			f.Verb = v
		}
	}
	return f, nil
}

func knownMethod(m Method) bool {
	switch m {
	case MethodCreate, MethodUpdate, MethodDelete, MethodStartPreview, MethodStopPreview, MethodCommit:
		return true
	}
	return false
}

// Match reports whether op passes the filter.
func (f OperationFilter) Match(op *Operation) bool {
	return (f.Done == "" || (f.Done == "true") == op.Done) &&
		(f.Target == "" || f.Target == op.Metadata.Target) &&
		(f.Verb == "" || f.Verb == op.Metadata.Verb)
}

// OperationListRequest is google.longrunning.ListOperationsRequest.
type OperationListRequest struct {
	Filter    string
	PageSize  int
	PageToken string
}

// OperationListResponse is one page of operations, in name order.
type OperationListResponse struct {
	Operations    []*Operation `json:"operations"`
	NextPageToken string       `json:"nextPageToken,omitempty"`
}

// ListOperations returns one page of the operations of st passing the
// request's filter. Page tokens are bound to the filter, as the
// experiments list's are; a document that does not decode is skipped.
func ListOperations(st *raftstore.State, req OperationListRequest) (OperationListResponse, error) {
	f, err := ParseOperationFilter(req.Filter)
	if err != nil {
		return OperationListResponse{}, err
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return OperationListResponse{}, err
	}
	tok := pageToken{Parent: OperationsParent, Filter: strings.TrimSpace(req.Filter)}
	if req.PageToken != "" {
		prev, err := decodeToken(req.PageToken)
		if err != nil {
			return OperationListResponse{}, err
		}
		if prev.Parent != tok.Parent || prev.Filter != tok.Filter {
			return OperationListResponse{}, errorf(InvalidArgument,
				"pageToken was issued for another filter: send the filter it was issued for, or no pageToken")
		}
		tok.After = prev.After
	}
	var sel []*Operation
	for id, doc := range st.Operations {
		if "operations/"+id <= tok.After {
			continue
		}
		if op, err := DecodeOperation(doc.Data); err == nil && f.Match(op) {
			sel = append(sel, op)
		}
	}
	slices.SortFunc(sel, func(a, b *Operation) int { return cmp.Compare(a.Name, b.Name) })
	if len(sel) <= size {
		return OperationListResponse{Operations: append([]*Operation{}, sel...)}, nil
	}
	tok.After = sel[size-1].Name
	return OperationListResponse{Operations: sel[:size], NextPageToken: tok.encode()}, nil
}

// Cancel returns op done with the error CANCELLED (google.longrunning
// CancelOperation). What the operation already did stays done: a commit
// already pushed is live or about to be.
func (op *Operation) Cancel(now time.Time) *Operation {
	c := *op
	msg := "cancelled by a client"
	if c.Metadata.Commit != "" {
		msg += "; commit " + c.Metadata.Commit + " was already pushed and stays"
	}
	c.Done, c.Response, c.Error, c.Metadata.EndTime = true, nil,
		&OperationError{Code: int(errs.Canceled), Message: msg}, now
	return &c
}
