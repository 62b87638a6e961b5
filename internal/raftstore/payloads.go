package raftstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// The payloads below carry every time, SHA and number the state machine
// stores: the proposer decides them, Apply never reads a clock.

// StageGeneration proposes a validated bundle as the next generation.
type StageGeneration struct {
	// Generation is the new number; it must exceed every known number.
	Generation uint64 `json:"generation"`
	// Commit is the git commit the bundle was read from.
	Commit string `json:"commit"`
	// Files is the policies root at Commit: path to content. Empty in a
	// chunked stage.
	Files map[string][]byte `json:"files"`
	// Etags maps policy name to the etag of its merged form.
	Etags map[string]string `json:"etags"`
	// CreateTime is when the leader staged it.
	CreateTime time.Time `json:"createTime"`
	// Chunked maps each file's path to the hashes of its chunks, in
	// order, put by PutChunks entries before this one. Only in version 2
	// (a build before chunks refuses the field); ProposeGeneration uses it
	// only for a bundle over MaxInlineBundleBytes.
	Chunked map[string][]string `json:"chunked,omitempty"`
	// History says who made the commit and, for a revert, what it rolled
	// back to. Only in version 3 (release 1.1.0; 1.0.0 refuses unknown
	// fields), so ProposeGeneration leaves it out until every member
	// runs 1.1.0.
	History
}

// History is what a generation's history shows besides its commit: the
// commit's author and, for a rollback, its target and who asked. The
// leader reads it from git (the revert commit's message) and bounds it;
// every field is display text from a repository, never markup.
type History struct {
	// Author is the commit's author as git has it: "Name <email>".
	Author string `json:"author,omitempty"`
	// RollbackOf is the generation a revert commit restored; 0 for any
	// other commit.
	RollbackOf uint64 `json:"rollbackOf,omitempty"`
	// RequestedBy is who asked for the rollback: the API credential's
	// name and role ("alice (admin)"), or what a revert pushed by hand
	// says.
	RequestedBy string `json:"requestedBy,omitempty"`
}

// MaxHistoryText bounds Author and RequestedBy, in bytes.
const MaxHistoryText = 256

// IsZero reports whether h says nothing.
func (h History) IsZero() bool { return h == History{} }

// StageChunkedVersion is the StageGeneration version that may carry
// Chunked.
const StageChunkedVersion uint8 = 2

// StageHistoryVersion is the StageGeneration version that may carry
// History.
const StageHistoryVersion uint8 = 3

// payloadVersion keeps a stage without chunks at version 1, byte for byte
// what builds before chunks write and apply, and one without history at
// most at version 2, what 1.0.0 applies.
func (p StageGeneration) payloadVersion() uint8 {
	switch {
	case !p.History.IsZero():
		return StageHistoryVersion
	case len(p.Chunked) > 0:
		return StageChunkedVersion
	}
	return 1
}

// ReportReady says a node compiled a generation and can switch to it.
type ReportReady struct {
	Generation uint64    `json:"generation"`
	NodeID     string    `json:"nodeId"`
	Time       time.Time `json:"time"`
}

// ReportFailed says a node could not compile a generation. Written at
// version 2, it records the node's errors and leaves a STAGED generation
// STAGED: the node is left behind, not the generation (version 1 made it
// INVALID; applyFailed keeps that for old entries).
type ReportFailed struct {
	Generation uint64    `json:"generation"`
	NodeID     string    `json:"nodeId"`
	Errors     []string  `json:"errors"`
	Time       time.Time `json:"time"`
}

// ReportFailedVersion is the ReportFailed version this build writes (see
// ReportFailed). The payload is the same in both versions, only its
// meaning changed, so a leader may relabel an older node's report
// (cluster.ProposeCommand).
const ReportFailedVersion uint8 = 2

// ActivateGeneration switches the cluster to a STAGED generation; every
// node swaps at the log index of this command.
type ActivateGeneration struct {
	Generation uint64    `json:"generation"`
	Time       time.Time `json:"time"`
}

// MarkInvalid records a leader-side failure (validation, git) for a commit.
// With a new number it records the failed commit without files; with the
// number of a STAGED generation it invalidates it.
type MarkInvalid struct {
	Generation uint64    `json:"generation"`
	Commit     string    `json:"commit"`
	Errors     []string  `json:"errors"`
	Time       time.Time `json:"time"`
}

// UpsertNode registers a node or updates its addresses and group. Group and
// subgroup of a registered node change only while it is PASSIVE.
type UpsertNode struct {
	ID       string    `json:"id"`
	RaftAddr string    `json:"raftAddr"`
	HTTPAddr string    `json:"httpAddr"`
	Group    string    `json:"group"`
	Subgroup string    `json:"subgroup"`
	Voter    bool      `json:"voter"`
	Time     time.Time `json:"time"`
}

// RemoveNode forgets a node. Removing an unknown node is not an error.
type RemoveNode struct {
	ID string `json:"id"`
}

// SetNodeState changes a node's administrative state.
type SetNodeState struct {
	ID    string    `json:"id"`
	State NodeState `json:"state"`
}

// LegacyPutExperiment is the PutExperiment of the builds before the
// typed tables: a document under any name, the leader's records included.
// Apply routes it by name (migrate.go); nobody proposes it any more.
type LegacyPutExperiment struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
}

// LegacyDeleteExperiment is the DeleteExperiment of the builds before the
// typed tables, routed by name like LegacyPutExperiment.
type LegacyDeleteExperiment struct {
	Name string `json:"name"`
}

// PutOperation stores a long-running operation document by id.
//
// Version 2 (release 1.1.0) adds IfMatch: the write applies only while the
// stored document is the one the proposer read, so a departing leader's
// cancel and the next leader's completion cannot both land, the later
// silently overwriting the earlier. Version 1 writes unconditionally; the
// leader writes version 2 only once every member runs 1.1.0 (features.go).
type PutOperation struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data,omitempty"`
	// IfMatch is OperationMatch of the stored document the write replaces;
	// "" writes unconditionally (version 1).
	IfMatch string `json:"ifMatch,omitempty"`
}

// ConditionalOperationVersion is the PutOperation version that carries
// IfMatch.
const ConditionalOperationVersion uint8 = 2

// payloadVersion keeps an unconditional write at version 1, byte for byte
// what 1.0.0 writes and applies.
func (p PutOperation) payloadVersion() uint8 {
	if p.IfMatch != "" {
		return ConditionalOperationVersion
	}
	return 1
}

// OperationMatch is the IfMatch of a stored operation document: its
// SHA-256 in hex, "" for none (an operation that is not stored matches no
// conditional write).
func OperationMatch(op Operation, ok bool) string {
	if !ok {
		return ""
	}
	sum := sha256.Sum256(op.Data)
	return hex.EncodeToString(sum[:])
}

// DeleteOperation removes an operation. Deleting an unknown one is not an
// error.
type DeleteOperation struct {
	ID string `json:"id"`
}

// CommandType implements Payload.
func (StageGeneration) CommandType() CommandType { return TypeStageGeneration }

// CommandType implements Payload.
func (ReportReady) CommandType() CommandType { return TypeReportReady }

// CommandType implements Payload.
func (ReportFailed) CommandType() CommandType { return TypeReportFailed }

// CommandType implements Payload.
func (ActivateGeneration) CommandType() CommandType { return TypeActivateGeneration }

// CommandType implements Payload.
func (MarkInvalid) CommandType() CommandType { return TypeMarkInvalid }

// CommandType implements Payload.
func (UpsertNode) CommandType() CommandType { return TypeUpsertNode }

// CommandType implements Payload.
func (RemoveNode) CommandType() CommandType { return TypeRemoveNode }

// CommandType implements Payload.
func (SetNodeState) CommandType() CommandType { return TypeSetNodeState }

// CommandType implements Payload.
func (LegacyPutExperiment) CommandType() CommandType { return TypeLegacyPutExperiment }

// CommandType implements Payload.
func (LegacyDeleteExperiment) CommandType() CommandType { return TypeLegacyDeleteExperiment }

// CommandType implements Payload.
func (PutOperation) CommandType() CommandType { return TypePutOperation }

// CommandType implements Payload.
func (DeleteOperation) CommandType() CommandType { return TypeDeleteOperation }

// BundleSize is what MaxInlineBundleBytes limits: paths plus inline
// contents (a chunked stage's size is known once its chunks are).
func (p StageGeneration) BundleSize() int {
	n := 0
	for path, content := range p.Files {
		n += len(path) + len(content)
	}
	return n
}

// Validate implements Payload.
func (p StageGeneration) Validate() error {
	if err := needGeneration(p.Generation); err != nil {
		return err
	}
	if p.Commit == "" {
		return invalid("commit is required")
	}
	if size := p.BundleSize(); size > MaxInlineBundleBytes {
		return fmt.Errorf("%w: %w: generation %d is %d bytes inline, limit MaxInlineBundleBytes %d: stage it in chunks (ProposeGeneration)",
			ErrInvalidCommand, ErrTooLarge, p.Generation, size, MaxInlineBundleBytes)
	}
	if len(p.Chunked) > 0 {
		if err := validateChunked(p.Files, p.Chunked); err != nil {
			return err
		}
	}
	if len(p.Author) > MaxHistoryText || len(p.RequestedBy) > MaxHistoryText {
		return invalid("author and requestedBy are limited to %d bytes", MaxHistoryText)
	}
	return needTime("createTime", p.CreateTime)
}

// Validate implements Payload.
func (p ReportReady) Validate() error {
	return first(needGeneration(p.Generation), needID("nodeId", p.NodeID), needTime("time", p.Time))
}

// Validate implements Payload.
func (p ReportFailed) Validate() error {
	if len(p.Errors) == 0 {
		return invalid("errors are required")
	}
	return first(needGeneration(p.Generation), needID("nodeId", p.NodeID), needTime("time", p.Time))
}

// Validate implements Payload.
func (p ActivateGeneration) Validate() error {
	return first(needGeneration(p.Generation), needTime("time", p.Time))
}

// Validate implements Payload.
func (p MarkInvalid) Validate() error {
	if len(p.Errors) == 0 {
		return invalid("errors are required")
	}
	return first(needGeneration(p.Generation), needTime("time", p.Time))
}

// Validate implements Payload.
func (p UpsertNode) Validate() error {
	return first(needID("id", p.ID), needTime("time", p.Time))
}

// Validate implements Payload.
func (p RemoveNode) Validate() error { return needID("id", p.ID) }

// Validate implements Payload.
func (p SetNodeState) Validate() error {
	if !p.State.Valid() {
		return invalid("unknown node state %q", p.State)
	}
	return needID("id", p.ID)
}

// Validate implements Payload.
func (p LegacyPutExperiment) Validate() error { return needID("name", p.Name) }

// Validate implements Payload.
func (p LegacyDeleteExperiment) Validate() error { return needID("name", p.Name) }

// Validate implements Payload.
func (p PutOperation) Validate() error {
	if p.IfMatch != "" {
		if _, err := hex.DecodeString(p.IfMatch); err != nil || len(p.IfMatch) != 2*sha256.Size {
			return invalid("ifMatch must be a SHA-256 in hex")
		}
	}
	return needID("id", p.ID)
}

// Validate implements Payload.
func (p DeleteOperation) Validate() error { return needID("id", p.ID) }

func needGeneration(n uint64) error {
	if n == 0 {
		return invalid("generation must be positive")
	}
	return nil
}

func needID(field, v string) error {
	if v == "" {
		return invalid("%s is required", field)
	}
	return nil
}

func needTime(field string, t time.Time) error {
	if t.IsZero() {
		return invalid("%s is required: the proposer sets every time", field)
	}
	return nil
}

func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stampTime fills the proposer-side time of a payload passed by pointer
// when it was left zero. Values are left alone (and fail validation if the
// time is required).
func stampTime(p Payload, now time.Time) {
	var t *time.Time
	switch v := p.(type) {
	case *StageGeneration:
		t = &v.CreateTime
	case *ReportReady:
		t = &v.Time
	case *ReportFailed:
		t = &v.Time
	case *ActivateGeneration:
		t = &v.Time
	case *MarkInvalid:
		t = &v.Time
	case *UpsertNode:
		t = &v.Time
	case *PutClaim:
		t = &v.Claim.Time
	}
	if t != nil && t.IsZero() {
		*t = now
	}
}
