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

	TypeUpsertNode   CommandType = 10
	TypeRemoveNode   CommandType = 11
	TypeSetNodeState CommandType = 12
	TypeHeartbeat    CommandType = 13

	TypePutExperiment    CommandType = 20
	TypeDeleteExperiment CommandType = 21

	TypePutOperation    CommandType = 30
	TypeDeleteOperation CommandType = 31
)

var typeNames = map[CommandType]string{
	TypeStageGeneration:    "StageGeneration",
	TypeReportReady:        "ReportReady",
	TypeReportFailed:       "ReportFailed",
	TypeActivateGeneration: "ActivateGeneration",
	TypeMarkInvalid:        "MarkInvalid",
	TypeUpsertNode:         "UpsertNode",
	TypeRemoveNode:         "RemoveNode",
	TypeSetNodeState:       "SetNodeState",
	TypeHeartbeat:          "Heartbeat",
	TypePutExperiment:      "PutExperiment",
	TypeDeleteExperiment:   "DeleteExperiment",
	TypePutOperation:       "PutOperation",
	TypeDeleteOperation:    "DeleteOperation",
}

// String names the type for logs and errors.
func (t CommandType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// CommandVersion is the payload version this build writes. A payload gains
// a field only together with a version bump, so that a node never silently
// drops a field it does not know (payloads are decoded strictly).
const CommandVersion uint8 = 1

// Size limits, checked before a command reaches the log and again in Apply.
const (
	// MaxGenerationBytes bounds a generation bundle: the sum of the lengths
	// of its file paths and contents. Every bundle travels in the log and
	// up to three of them (staged, active, previous) live in memory and in
	// every snapshot.
	MaxGenerationBytes = 8 << 20
	// MaxPayloadBytes bounds the encoded payload of every command other
	// than StageGeneration (stats, experiment and operation documents).
	MaxPayloadBytes = 1 << 20
	// maxStagePayloadBytes leaves room for base64 (4/3) and JSON framing
	// around a bundle that fits MaxGenerationBytes.
	maxStagePayloadBytes = MaxGenerationBytes/3*4 + 1<<20
)

// Command is the envelope stored in each raft log entry, encoded as JSON.
// JSON keeps log entries and snapshots inspectable with standard tools; the
// cost (base64 for bundles) is irrelevant at this command rate.
type Command struct {
	// Type selects the handler in the dispatch table.
	Type CommandType `json:"type"`
	// Version is the payload version, 1..CommandVersion.
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
	return Command{Type: p.CommandType(), Version: CommandVersion, Payload: raw}, nil
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
	if t == TypeStageGeneration {
		return maxStagePayloadBytes
	}
	return MaxPayloadBytes
}
