package preview

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/policyrollout/reconciler/internal/errs"
)

// Method is an experiment method that runs as a long-running operation.
type Method string

// The long-running experiment methods.
const (
	MethodCreate       Method = "create"
	MethodUpdate       Method = "update"
	MethodDelete       Method = "delete"
	MethodStartPreview Method = "startPreview"
	MethodStopPreview  Method = "stopPreview"
	MethodCommit       Method = "commit"
)

// TypePrefix starts the @type URL of every message this API names.
const TypePrefix = "type.googleapis.com/reconciler.v1."

// emptyType is the response type of commit, which leaves no experiment.
const emptyType = "type.googleapis.com/google.protobuf.Empty"

// MetadataType is the operation metadata message of m, named per AIP-151
// as {Method}PolicyExperimentMetadata (e.g. StartPreviewPolicyExperimentMetadata).
func (m Method) MetadataType() string {
	s := string(m)
	if s == "" {
		return ""
	}
	return string(s[0]-'a'+'A') + s[1:] + ResourceType + "Metadata"
}

// ResponseType is the operation response type of m: PolicyExperiment for
// every method AIP-236 names it for (delete included), Empty for commit.
func (m Method) ResponseType() string {
	if m == MethodCommit {
		return emptyType
	}
	return TypePrefix + ResourceType
}

// Operation is a google.longrunning.Operation for an experiment method.
// Either Response or Error is set once Done.
type Operation struct {
	Name     string            `json:"name"` // "operations/{id}"
	Done     bool              `json:"done"`
	Metadata OperationMetadata `json:"metadata"`
	Response json.RawMessage   `json:"response,omitempty"`
	Error    *OperationError   `json:"error,omitempty"`
}

// OperationMetadata is the {Method}PolicyExperimentMetadata message.
type OperationMetadata struct {
	Type       string    `json:"@type"`
	Target     string    `json:"target"` // the experiment's resource name
	Verb       string    `json:"verb"`
	CreateTime time.Time `json:"createTime"`
	EndTime    time.Time `json:"endTime,omitzero"`
	// Commit is the commit a commit operation pushed (or GitHub merged),
	// set once it is pushed: a leader that did not start the operation
	// completes it when that commit's generation is active or INVALID.
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

// internalCode is google.rpc.Code INTERNAL.
const internalCode = 13

// OperationID derives an operation id from what it is about, so the
// leader can name it before proposing, deterministically.
func OperationID(m Method, target string, now time.Time) string {
	sum := sha256.Sum256([]byte(string(m) + "\x00" + target + "\x00" + strconv.FormatInt(now.UnixNano(), 10)))
	return hex.EncodeToString(sum[:12])
}

// NewOperation starts an operation for method m on target.
func NewOperation(id string, m Method, target string, now time.Time) *Operation {
	return &Operation{
		Name: "operations/" + id,
		Metadata: OperationMetadata{
			Type: TypePrefix + m.MetadataType(), Target: target, Verb: string(m), CreateTime: now,
		},
	}
}

// Succeed returns op done with resp as its response (nil for commit,
// whose response is Empty).
func (op *Operation) Succeed(resp *Experiment, now time.Time) (*Operation, error) {
	c := *op
	m := Method(op.Metadata.Verb)
	if m == MethodCommit {
		resp = nil // commit leaves no experiment: its response is Empty
	}
	body, err := typed(m.ResponseType(), resp.public())
	if err != nil {
		return nil, err
	}
	c.Done, c.Response, c.Error, c.Metadata.EndTime = true, body, nil, now
	return &c, nil
}

// Fail returns op done with err, shown as the HTTP edge shows an error:
// an *Error by its message, another error that carries a code other than
// Internal (a sentinel such as gitsource's "nothing to commit") by its
// text, and anything else as an internal error whose text is not shown,
// since it may hold details meant for the log.
func (op *Operation) Fail(err error, now time.Time) *Operation {
	c := *op
	st := &OperationError{Code: internalCode, Message: "internal error"}
	var e *Error
	if errors.As(err, &e) {
		st = &OperationError{Code: int(e.Code), Message: e.Msg}
	} else if code, ok := errs.CodeOf(err); ok && code != errs.Internal {
		st = &OperationError{Code: int(code), Message: err.Error()}
	}
	c.Done, c.Response, c.Error, c.Metadata.EndTime = true, nil, st, now
	return &c
}

// typed renders v as a JSON object with "@type" first, as protobuf's Any
// does in JSON.
func typed(typeURL string, v any) (json.RawMessage, error) {
	head, _ := json.Marshal(map[string]string{"@type": typeURL})
	if v == nil || v == (*Experiment)(nil) {
		return head, nil
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(body, []byte("{}")) {
		return head, nil
	}
	out := append(head[:len(head)-1:len(head)-1], ',')
	return append(out, body[1:]...), nil
}
