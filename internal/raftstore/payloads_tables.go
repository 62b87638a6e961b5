package raftstore

import (
	"encoding/json"
	"strings"
)

// Payloads of the typed tables: AIP experiments and the leader's records.

// PutExperiment stores an AIP-236 experiment document under its resource
// name "policies/{policy}/experiments/{id}". The document is opaque here
// (internal/preview owns it) but must be a JSON object.
type PutExperiment struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	// Lists (version 2) are the list files the experiment's tree changes,
	// by content hash, as the hashes of chunks put before it (PutChunks):
	// the data its nodes compile it with. The chunks stay while an
	// experiment or a kept generation refers to them (collectChunks).
	Lists map[string][]string `json:"lists,omitempty"`
}

// PutExperimentListsVersion is the version of a PutExperiment with Lists.
const PutExperimentListsVersion = 2

// payloadVersion keeps an experiment without lists at version 1, which
// builds before experiment lists apply.
func (p PutExperiment) payloadVersion() uint8 {
	if len(p.Lists) > 0 {
		return PutExperimentListsVersion
	}
	return 1
}

// DeleteExperiment removes an experiment. Deleting an unknown one is not an
// error.
type DeleteExperiment struct {
	Name string `json:"name"`
}

// PutSourceStatus records the status of a policy source (today the one
// named SourceGit).
type PutSourceStatus struct {
	Source string       `json:"source"`
	Status SourceStatus `json:"status"`
}

// DeleteSourceStatus forgets a source's status: it fetches fine again.
type DeleteSourceStatus struct {
	Source string `json:"source"`
}

// SourceGit is the key of the policy repository in State.Sources.
const SourceGit = "git"

// PutBranch records a branch under its name.
type PutBranch struct {
	Record BranchRecord `json:"record"`
}

// DeleteBranch forgets a branch.
type DeleteBranch struct {
	Branch string `json:"branch"`
}

// PutPullVersion is the PutPull version this build writes. Version 2
// added PullRecord.HeadShown and HeadShownAt: a build that knows only
// version 1 refuses them as a command to upgrade for, not as a payload it
// cannot decode. Every version means the same.
const PutPullVersion uint8 = 2

// PutPull records an open pull request under its number.
type PutPull struct {
	Record PullRecord `json:"record"`
}

// DeletePull forgets a pull request.
type DeletePull struct {
	Number int `json:"number"`
}

// PutClaim records a claimed comment command under its comment id.
type PutClaim struct {
	Claim CommandClaim `json:"claim"`
}

// DeleteClaim forgets a claim.
type DeleteClaim struct {
	CommentID int64 `json:"commentId"`
}

// CommandType implements Payload.
func (PutExperiment) CommandType() CommandType { return TypePutExperiment }

// CommandType implements Payload.
func (DeleteExperiment) CommandType() CommandType { return TypeDeleteExperiment }

// CommandType implements Payload.
func (PutSourceStatus) CommandType() CommandType { return TypePutSourceStatus }

// CommandType implements Payload.
func (DeleteSourceStatus) CommandType() CommandType { return TypeDeleteSourceStatus }

// CommandType implements Payload.
func (PutBranch) CommandType() CommandType { return TypePutBranch }

// CommandType implements Payload.
func (DeleteBranch) CommandType() CommandType { return TypeDeleteBranch }

// CommandType implements Payload.
func (PutPull) CommandType() CommandType { return TypePutPull }

// CommandType implements Payload.
func (DeletePull) CommandType() CommandType { return TypeDeletePull }

// CommandType implements Payload.
func (PutClaim) CommandType() CommandType { return TypePutClaim }

// CommandType implements Payload.
func (DeleteClaim) CommandType() CommandType { return TypeDeleteClaim }

// Validate implements Payload.
func (p PutExperiment) Validate() error {
	if err := experimentName(p.Name); err != nil {
		return err
	}
	if !isObject(p.Data) {
		return invalid("experiment %s: the document must be a JSON object", p.Name)
	}
	return validateListRefs(p.Lists)
}

// Validate implements Payload.
func (p DeleteExperiment) Validate() error { return experimentName(p.Name) }

// Validate implements Payload.
func (p PutSourceStatus) Validate() error {
	return first(key("source", p.Source), p.Status.Validate())
}

// Validate implements Payload.
func (p DeleteSourceStatus) Validate() error { return key("source", p.Source) }

// Validate implements Payload.
func (p PutBranch) Validate() error { return p.Record.Validate() }

// Validate implements Payload.
func (p DeleteBranch) Validate() error { return key("branch", p.Branch) }

// Validate implements Payload.
func (p PutPull) Validate() error { return p.Record.Validate() }

// Validate implements Payload.
func (p DeletePull) Validate() error {
	if p.Number <= 0 {
		return invalid("number must be positive")
	}
	return nil
}

// Validate implements Payload.
func (p PutClaim) Validate() error { return p.Claim.Validate() }

// Validate implements Payload.
func (p DeleteClaim) Validate() error {
	if p.CommentID <= 0 {
		return invalid("commentId must be positive")
	}
	return nil
}

// experimentName checks the shape "policies/{policy}/experiments/{id}"
// with ids as AIP-122 allows them ([a-z][a-z0-9-]{0,62}); internal/preview
// applies the same rule to what it creates.
func experimentName(name string) error {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "policies" || parts[2] != "experiments" ||
		!resourceID(parts[1]) || !resourceID(parts[3]) {
		return invalid("%q is not an experiment name: want policies/{policy}/experiments/{id}", clip(name))
	}
	return nil
}

func resourceID(s string) bool {
	if s == "" || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isObject reports whether raw holds a JSON object (raw is valid JSON:
// the strict decoder checked it).
func isObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}
