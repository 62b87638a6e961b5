package preview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Experiments and operations travel in raft as opaque JSON documents
// (raftstore.PutExperiment, PutOperation); these helpers are the only
// place that encodes and decodes them.

// PutPayload returns the raft payload that stores e.
func (e *Experiment) PutPayload() (raftstore.PutExperiment, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return raftstore.PutExperiment{}, fmt.Errorf("preview: encoding %s: %w", e.Name, err)
	}
	return raftstore.PutExperiment{Name: e.Name, Data: data, Lists: e.ListChunks}, nil
}

// DeletePayload returns the raft payload that deletes the named experiment.
func DeletePayload(name string) raftstore.DeleteExperiment {
	return raftstore.DeleteExperiment{Name: name}
}

// PutPayload returns the raft payload that stores op.
func (op *Operation) PutPayload() (raftstore.PutOperation, error) {
	data, err := json.Marshal(op)
	if err != nil {
		return raftstore.PutOperation{}, fmt.Errorf("preview: encoding %s: %w", op.Name, err)
	}
	return raftstore.PutOperation{ID: strings.TrimPrefix(op.Name, "operations/"), Data: data}, nil
}

// DecodeExperiment reads a stored experiment document.
func DecodeExperiment(data []byte) (*Experiment, error) {
	var e Experiment
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("preview: decoding experiment: %w", err)
	}
	if _, _, err := ParseName(e.Name); err != nil {
		return nil, fmt.Errorf("preview: decoding experiment: %w", err)
	}
	return &e, nil
}

// DecodeOperation reads a stored operation document.
func DecodeOperation(data []byte) (*Operation, error) {
	var op Operation
	if err := json.Unmarshal(data, &op); err != nil {
		return nil, fmt.Errorf("preview: decoding operation: %w", err)
	}
	return &op, nil
}

// FromState decodes every experiment of a replicated state, in name
// order. A document that does not decode is reported and skipped, so one
// bad entry cannot hide the others.
func FromState(s *raftstore.State) ([]*Experiment, []error) {
	var exps []*Experiment
	var errs []error
	for name, doc := range s.Experiments {
		e, err := DecodeExperiment(doc.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		exps = append(exps, e)
	}
	slices.SortFunc(exps, func(a, b *Experiment) int { return strings.Compare(a.Name, b.Name) })
	return exps, errs
}

// Input is what a client may set in a create or update body. Output-only
// fields (name, previewMetadata, source, times, stats...) are accepted and
// ignored, as AIP-203 asks; etag is kept for AIP-154 checks.
type Input struct {
	Policy      *policy.Policy
	Annotations map[string]string
	Etag        string
	// AutoStop is the body's autoStop (or auto_stop), nil when absent.
	AutoStop *AutoStop
}

// inputBody lists every field an experiment body may hold.
type inputBody struct {
	Name            json.RawMessage   `json:"name"`
	Etag            string            `json:"etag"`
	Policy          *policyBody       `json:"policy"`
	PreviewMetadata json.RawMessage   `json:"previewMetadata"`
	Annotations     map[string]string `json:"annotations"`
	AutoStop        *AutoStop         `json:"autoStop"`
	AutoStopProto   *AutoStop         `json:"auto_stop"`
	Source          json.RawMessage   `json:"source"`
	Previewed       json.RawMessage   `json:"previewed"`
	Reason          json.RawMessage   `json:"notPreviewedReason"`
	Conflict        json.RawMessage   `json:"conflict"`
	Validation      json.RawMessage   `json:"validation"`
	CreateTime      json.RawMessage   `json:"createTime"`
	UpdateTime      json.RawMessage   `json:"updateTime"`
	Stats           json.RawMessage   `json:"stats"`
	ListChanges     json.RawMessage   `json:"listChanges"`
	// The proto3 JSON spellings of the output-only fields (AIP-203:
	// accepted and ignored like the lowerCamelCase ones).
	PreviewMetadataProto json.RawMessage `json:"preview_metadata"`
	ReasonProto          json.RawMessage `json:"not_previewed_reason"`
	CreateTimeProto      json.RawMessage `json:"create_time"`
	UpdateTimeProto      json.RawMessage `json:"update_time"`
}

// ParseInput decodes a create or update body strictly: unknown fields,
// in the experiment or its policy, are INVALID_ARGUMENT.
func ParseInput(body []byte) (Input, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var in inputBody
	if err := dec.Decode(&in); err != nil {
		return Input{}, errorf(InvalidArgument, "experiment body: %v", err)
	}
	if dec.More() {
		return Input{}, errorf(InvalidArgument, "experiment body: unexpected data after the object")
	}
	var p *policy.Policy
	if in.Policy != nil {
		p = in.Policy.normalized()
		if err := uniqueRules(p.Rules); err != nil {
			return Input{}, err
		}
	}
	auto := in.AutoStop
	if auto == nil {
		auto = in.AutoStopProto
	}
	return Input{Policy: p, Annotations: in.Annotations, Etag: in.Etag, AutoStop: auto}, nil
}

// uniqueRules refuses a body that names a rule twice, naming both places
// in the body (a body has no file and line to point at).
func uniqueRules(rules []policy.Rule) error {
	first := make(map[string]int, len(rules))
	var dups []string
	for i, r := range rules {
		if j, dup := first[r.Name]; dup {
			dups = append(dups, fmt.Sprintf("policy.rules[%d]: rule %q is defined twice (also at policy.rules[%d])", i, r.Name, j))
			continue
		}
		first[r.Name] = i
	}
	if len(dups) == 0 {
		return nil
	}
	return errorf(InvalidArgument, "experiment body: %s", strings.Join(dups, "; "))
}

// policyBody is the embedded policy of a create or update body. It takes
// the JSON of GET /v1/policies/{policy} unchanged: the output-only fields
// of the live policy (etag, generation, commit) are accepted and ignored
// (AIP-203), and its name may be the resource name "policies/{policy}".
type policyBody struct {
	policy.Policy
	Etag       json.RawMessage `json:"etag"`
	Generation json.RawMessage `json:"generation"`
	Commit     json.RawMessage `json:"commit"`
	// Lists (the named lists the live policy uses) is output-only too.
	Lists json.RawMessage `json:"lists"`
}

// normalized is the policy with its short name, the defaults a
// policy.toml without group or on_error gets and its strings trimmed, so
// that a minimal body and the file it commits mean the same thing.
func (b *policyBody) normalized() *policy.Policy {
	p := b.Policy
	p.Name = strings.TrimPrefix(p.Name, "policies/")
	// Trimmed as loading a file trims them, so that the committed file
	// loads back to the experiment's etag.
	p.Description, p.Group = strings.TrimSpace(p.Description), strings.TrimSpace(p.Group)
	if p.Rules != nil {
		p.Rules = append([]policy.Rule{}, p.Rules...)
	}
	for i := range p.Rules {
		p.Rules[i].Match = strings.TrimSpace(p.Rules[i].Match)
		p.Rules[i].Description = strings.TrimSpace(p.Rules[i].Description)
	}
	if p.Group == "" {
		p.Group = policy.DefaultGroup
	}
	if p.OnError == "" {
		p.OnError = policy.OnErrorDeny
	}
	return &p
}
