package apiv1

import (
	"encoding/json"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
)

// Operation is an AIP-151 long-running operation (google.longrunning
// Operation) of an experiment write.
type Operation struct {
	Name     string            `json:"name"` // "operations/{id}"
	Done     bool              `json:"done"`
	Metadata OperationMetadata `json:"metadata"`
	// Response is the experiment the operation wrote, once done.
	Response json.RawMessage `json:"response,omitempty"`
	Error    *OperationError `json:"error,omitempty"`
}

// OperationMetadata is the {Method}PolicyExperimentMetadata message.
type OperationMetadata struct {
	Type       string    `json:"@type"`
	Target     string    `json:"target"` // the experiment's resource name
	Verb       string    `json:"verb"`
	CreateTime time.Time `json:"createTime"`
	EndTime    time.Time `json:"endTime,omitzero"`
	// Commit is the commit a commit operation pushed (or GitHub merged).
	Commit string `json:"commit,omitempty"`
	// TestsRemoved is, on a commit, how many tests of the live policy the
	// committed experiment does not have: the tests the commit deletes.
	TestsRemoved *int `json:"testsRemoved,omitempty"`
}

// OperationError is a google.rpc.Status: a failed operation's error.
type OperationError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// OperationList is one page of GET /v1/operations.
type OperationList struct {
	Operations    []*Operation `json:"operations"`
	NextPageToken string       `json:"nextPageToken,omitempty"`
}

// FromOperation maps a replicated operation; nil stays nil.
func FromOperation(op *preview.Operation) *Operation {
	if op == nil {
		return nil
	}
	m := op.Metadata
	out := &Operation{Name: op.Name, Done: op.Done, Response: op.Response,
		Metadata: OperationMetadata{Type: m.Type, Target: m.Target, Verb: m.Verb, CreateTime: m.CreateTime,
			EndTime: m.EndTime, Commit: m.Commit, TestsRemoved: m.TestsRemoved}}
	if op.Error != nil {
		out.Error = &OperationError{Code: op.Error.Code, Message: op.Error.Message}
	}
	return out
}

// FromOperationList maps one page of operations.
func FromOperationList(res preview.OperationListResponse) OperationList {
	out := OperationList{NextPageToken: res.NextPageToken}
	if res.Operations != nil {
		out.Operations = make([]*Operation, 0, len(res.Operations))
	}
	for _, op := range res.Operations {
		out.Operations = append(out.Operations, FromOperation(op))
	}
	return out
}
