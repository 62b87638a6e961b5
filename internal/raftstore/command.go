package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CommandType identifies a command in the replicated log. The numbers are
// stored in every log entry and snapshot of every cluster: never renumber or
// reuse one, only add.
type CommandType uint8

// The command types. Gaps group related commands and leave room to grow.
const (
	TypeStageGeneration    CommandType = 1
	TypeReportReady        CommandType = 2
	TypeReportFailed       CommandType = 3
	TypeActivateGeneration CommandType = 4
	TypeMarkInvalid        CommandType = 5
	// TypePutChunks carries content-addressed chunks of files that a
	// StageGeneration of version 2 refers to (chunks.go).
	TypePutChunks CommandType = 6

	TypeUpsertNode   CommandType = 10
	TypeRemoveNode   CommandType = 11
	TypeSetNodeState CommandType = 12
	// 13 was Heartbeat: no build ever proposed it (node liveness travels
	// over HTTP, internal/cluster). Reserved; see reservedTypes.

	// 20 and 21 are the experiment commands of the builds before the typed
	// tables, whose documents were also the leader's records under other
	// prefixes. Apply still accepts them from old log entries and routes
	// each document to its table (migrate.go); proposers use 22 and 23.
	TypeLegacyPutExperiment    CommandType = 20
	TypeLegacyDeleteExperiment CommandType = 21
	TypePutExperiment          CommandType = 22
	TypeDeleteExperiment       CommandType = 23
	// Dismissals of deleted source experiments (dismissals.go).
	TypePutDismissal    CommandType = 24
	TypeDeleteDismissal CommandType = 25

	TypePutOperation    CommandType = 30
	TypeDeleteOperation CommandType = 31

	// The leader's records (tables.go).
	TypePutSourceStatus    CommandType = 40
	TypeDeleteSourceStatus CommandType = 41
	TypePutBranch          CommandType = 42
	TypeDeleteBranch       CommandType = 43
	TypePutPull            CommandType = 44
	TypeDeletePull         CommandType = 45
	TypePutClaim           CommandType = 50
	TypeDeleteClaim        CommandType = 51

	// TypeTxn applies several commands as one log entry, all or none.
	TypeTxn CommandType = 60
)

// reservedTypes were used once and must never get a new meaning: a log or
// snapshot somewhere may still hold them.
var reservedTypes = []CommandType{13}

var typeNames = map[CommandType]string{
	TypeStageGeneration:        "StageGeneration",
	TypeReportReady:            "ReportReady",
	TypeReportFailed:           "ReportFailed",
	TypeActivateGeneration:     "ActivateGeneration",
	TypeMarkInvalid:            "MarkInvalid",
	TypePutChunks:              "PutChunks",
	TypeUpsertNode:             "UpsertNode",
	TypeRemoveNode:             "RemoveNode",
	TypeSetNodeState:           "SetNodeState",
	TypeLegacyPutExperiment:    "LegacyPutExperiment",
	TypeLegacyDeleteExperiment: "LegacyDeleteExperiment",
	TypePutExperiment:          "PutExperiment",
	TypeDeleteExperiment:       "DeleteExperiment",
	TypePutDismissal:           "PutDismissal",
	TypeDeleteDismissal:        "DeleteDismissal",
	TypePutOperation:           "PutOperation",
	TypeDeleteOperation:        "DeleteOperation",
	TypePutSourceStatus:        "PutSourceStatus",
	TypeDeleteSourceStatus:     "DeleteSourceStatus",
	TypePutBranch:              "PutBranch",
	TypeDeleteBranch:           "DeleteBranch",
	TypePutPull:                "PutPull",
	TypeDeletePull:             "DeletePull",
	TypePutClaim:               "PutClaim",
	TypeDeleteClaim:            "DeleteClaim",
	TypeTxn:                    "Txn",
}

// String names the type for logs and errors.
func (t CommandType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// CommandVersion is the first payload version of every command type.
// NewCommand writes each type's newest version (its row in the dispatch
// table). A payload gains a field, or a command a new meaning, only
// together with a version bump, so that a node never silently drops a
// field it does not know (payloads are decoded strictly) and an old log
// entry keeps the meaning it was written with.
const CommandVersion uint8 = 1

// Size limits, checked before a command reaches the log and again in Apply.
const (
	// MaxGenerationBytes bounds a generation bundle: the sum of the lengths
	// of its file paths and contents. A bundle over MaxInlineBundleBytes
	// travels as chunks (PutChunks, at most MaxChunkCommandBytes each)
	// and a Stage that refers to them; up to three bundles (staged,
	// active, previous) live in memory and in every snapshot, sharing
	// unchanged files.
	MaxGenerationBytes = 256 << 20
	// MaxInlineBundleBytes bounds a bundle staged in one entry with its
	// contents (StageGeneration version 1, what every build before chunks
	// wrote and can apply): the leader stages a bundle this small the old
	// way, so an older follower keeps applying it during an upgrade.
	MaxInlineBundleBytes = 8 << 20
	// MaxPayloadBytes bounds the encoded payload of every command other
	// than StageGeneration and Txn (experiment and operation documents,
	// the leader's records).
	MaxPayloadBytes = 1 << 20
	// MaxTxnBytes bounds a Txn's payload: an experiment, its operation
	// (which repeats it) and the experiments a delete lets into preview.
	MaxTxnBytes = 4 << 20
	// MaxTxnOps bounds the commands of one Txn: enough to close every
	// pull request of a full table with its claims in one entry.
	MaxTxnOps = MaxPulls + MaxClaims
	// maxStagePayloadBytes leaves room for base64 (4/3) and JSON framing
	// around a bundle that fits MaxInlineBundleBytes.
	maxStagePayloadBytes = MaxInlineBundleBytes/3*4 + 1<<20
)

// Command is the envelope stored in each raft log entry, encoded as JSON.
// JSON keeps log entries and snapshots inspectable with standard tools; the
// cost (base64 for bundles) is irrelevant at this command rate.
type Command struct {
	// Type selects the handler in the dispatch table.
	Type CommandType `json:"type"`
	// Version is the payload version, 1 to the type's newest.
	Version uint8 `json:"version"`
	// Payload is the JSON encoding of the payload struct of Type.
	Payload json.RawMessage `json:"payload"`
}

// Payload is implemented by every command payload struct.
type Payload interface {
	// CommandType returns the type written into the envelope.
	CommandType() CommandType
	// Validate checks the payload on its own, without state. It must be
	// deterministic: the applier runs it again on every node.
	Validate() error
}

// NewCommand validates p and wraps it in an envelope. This is where an
// oversized bundle is refused, before it costs a log entry on every node.
func NewCommand(p Payload) (Command, error) {
	if err := p.Validate(); err != nil {
		return Command{}, fmt.Errorf("%s: %w", p.CommandType(), err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return Command{}, fmt.Errorf("encode %s: %w", p.CommandType(), err)
	}
	if max := maxPayload(p.CommandType()); len(raw) > max {
		return Command{}, fmt.Errorf("%s: %w", p.CommandType(),
			invalid("payload is %d bytes, limit %d", len(raw), max))
	}
	return Command{Type: p.CommandType(), Version: payloadVersion(p), Payload: raw}, nil
}

// versioned is a payload that is written at an older version when it does
// not need the newest one, so that builds that know only the older version
// keep applying it (StageGeneration without chunks).
type versioned interface {
	payloadVersion() uint8
}

// payloadVersion is the version NewCommand writes for p.
func payloadVersion(p Payload) uint8 {
	if v, ok := p.(versioned); ok {
		return v.payloadVersion()
	}
	return newestVersion(p.CommandType())
}

// Marshal encodes the envelope for a raft log entry.
func (c Command) Marshal() ([]byte, error) {
	return json.Marshal(c)
}

// DecodeCommand decodes a log entry's data into an envelope.
func DecodeCommand(data []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return Command{}, invalid("decode envelope: %v", err)
	}
	if len(c.Payload) == 0 {
		return Command{}, invalid("envelope has no payload")
	}
	return c, nil
}

// decodePayload decodes strictly: an unknown field means the proposer
// speaks a payload version this build does not, and ignoring the field
// could make nodes diverge.
func decodePayload(raw json.RawMessage, p any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return invalid("decode payload: %v", err)
	}
	return nil
}

func maxPayload(t CommandType) int {
	switch t {
	case TypeStageGeneration:
		return maxStagePayloadBytes
	case TypeTxn:
		return MaxTxnBytes
	case TypePutChunks:
		return maxChunkPayloadBytes
	}
	return MaxPayloadBytes
}
