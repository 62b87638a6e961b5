package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Applier applies commands to a State. It has no raft, lock or clock in
// it, so tests and recovery tools can drive it directly; the FSM is a thin
// adapter around it. Every handler validates fully before it mutates, so a
// rejected command leaves the state untouched. Not safe for concurrent use.
type Applier struct {
	// State is mutated in place.
	State *State
	// IgnoreUnknown makes unknown command types and versions a no-op
	// instead of a rejection. Set it during a rolling upgrade, when an
	// upgraded leader may already propose commands this build lacks; the
	// node then trails the cluster for those commands until it is upgraded.
	IgnoreUnknown bool
}

// handler is one row of the dispatch table.
type handler struct {
	// version is the newest payload version the handler understands.
	version uint8
	// check decodes and validates a payload without touching any state.
	check func(raw json.RawMessage) error
	// apply applies a payload of the given version (1..version): a
	// version may change what a command means, and an old entry keeps the
	// meaning it had when it was written.
	apply func(s *State, version uint8, raw json.RawMessage) error
}

// handlers is the dispatch table: one row per command type.
var handlers = map[CommandType]handler{
	TypeStageGeneration:    versionedRow(StageHistoryVersion, applyStage),
	TypePutChunks:          row(1, applyPutChunks),
	TypeReportReady:        row(1, applyReady),
	TypeReportFailed:       versionedRow(ReportFailedVersion, applyFailed),
	TypeActivateGeneration: row(1, applyActivate),
	TypeMarkInvalid:        row(1, applyMarkInvalid),
	TypeUpsertNode:         row(1, applyUpsertNode),
	TypeRemoveNode:         row(1, applyRemoveNode),
	TypeSetNodeState:       row(1, applySetNodeState),
	TypePutOperation:       versionedRow(ConditionalOperationVersion, applyPutOperation),
	TypeDeleteOperation:    row(1, applyDeleteOperation),
}

// init adds the rows of the typed tables (applier_tables.go); they refer
// to handlers that use the table themselves (a Txn, a legacy command).
func init() {
	for t, h := range tableHandlers() {
		handlers[t] = h
	}
}

// row turns a typed handler into a table row: decode strictly, validate,
// then apply. Every version up to version means the same.
func row[P Payload](version uint8, fn func(*State, P) error) handler {
	return versionedRow(version, func(s *State, _ uint8, p P) error { return fn(s, p) })
}

// versionedRow is row for a handler whose meaning depends on the
// entry's version.
func versionedRow[P Payload](version uint8, fn func(*State, uint8, P) error) handler {
	return handler{
		version: version,
		check: func(raw json.RawMessage) error {
			_, err := decodeValid[P](raw)
			return err
		},
		apply: func(s *State, v uint8, raw json.RawMessage) error {
			p, err := decodeValid[P](raw)
			if err != nil {
				return err
			}
			return fn(s, v, p)
		},
	}
}

// newestVersion is the payload version this build writes for t.
func newestVersion(t CommandType) uint8 {
	if h, ok := handlers[t]; ok {
		return h.version
	}
	return CommandVersion
}

func decodeValid[P Payload](raw json.RawMessage) (P, error) {
	var p P
	if err := decodePayload(raw, &p); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// Supported reports whether this build can apply the type at the version.
func Supported(t CommandType, version uint8) bool {
	h, ok := handlers[t]
	return ok && version >= 1 && version <= h.version
}

// Validate checks everything about c that does not depend on the state:
// type, version, size and payload. Store.Apply runs it so that a command
// built by hand (not by NewCommand) is refused before the log too.
func (c Command) Validate() error {
	if !Supported(c.Type, c.Version) {
		return fmt.Errorf("%w: %s version %d", ErrUnknownCommand, c.Type, c.Version)
	}
	if max := maxPayload(c.Type); len(c.Payload) > max {
		return invalid("%s payload is %d bytes, limit %d", c.Type, len(c.Payload), max)
	}
	if err := handlers[c.Type].check(c.Payload); err != nil {
		return fmt.Errorf("%s: %w", c.Type, err)
	}
	return nil
}

// Apply applies one command. A nil result means the state changed as the
// command asked (or the command was ignored as unknown); an error wraps
// ErrRejected plus the reason, and the state is unchanged.
func (a *Applier) Apply(cmd Command) error {
	if !Supported(cmd.Type, cmd.Version) {
		if a.IgnoreUnknown {
			return nil
		}
		return reject(ErrUnknownCommand, "%s version %d: upgrade this node", cmd.Type, cmd.Version)
	}
	if max := maxPayload(cmd.Type); len(cmd.Payload) > max {
		return reject(ErrInvalidCommand, "%s payload is %d bytes, limit %d", cmd.Type, len(cmd.Payload), max)
	}
	var err error
	if cmd.Type == TypeTxn {
		err = a.applyTxn(cmd.Payload)
	} else {
		err = handlers[cmd.Type].apply(a.State, cmd.Version, cmd.Payload)
	}
	if err == nil && persistBeforePublish(cmd.Type) {
		collectChunks(a.State) // files may have been released
	}
	if err != nil && !errors.Is(err, ErrRejected) {
		err = fmt.Errorf("%w: %s: %w", ErrRejected, cmd.Type, err)
	}
	return err
}

func applyStage(s *State, version uint8, p StageGeneration) error {
	if p.Generation <= s.Highest {
		return reject(ErrGenerationNotNewer, "generation %d is not above the highest known %d",
			p.Generation, s.Highest)
	}
	files := nonNil(p.Files)
	if len(p.Chunked) > 0 {
		if version < StageChunkedVersion {
			return reject(ErrInvalidCommand, "chunked files in a version %d stage", version)
		}
		var err error
		if files, err = assemble(s, p.Generation, p.Chunked); err != nil {
			return err
		}
	}
	if version < StageHistoryVersion && !p.History.IsZero() {
		return reject(ErrInvalidCommand, "history in a version %d stage", version)
	}
	if old, ok := s.StagedGeneration(); ok {
		old.setState(GenerationSuperseded, p.CreateTime)
		old.Files, old.Chunked = nil, nil // never served: no reason to keep the bundle
		s.Generations[old.Number] = old
	}
	s.Generations[p.Generation] = Generation{
		Number:     p.Generation,
		State:      GenerationStaged,
		Commit:     p.Commit,
		Etags:      nonNil(p.Etags),
		Files:      files,
		Chunked:    p.Chunked,
		CreateTime: p.CreateTime,
		StateTime:  p.CreateTime,
		ReadyNodes: map[string]time.Time{},
		NodeErrors: map[string][]string{},
		History:    p.History,
	}
	s.Highest, s.Staged = p.Generation, p.Generation
	pruneHistory(s)
	return nil
}

func applyReady(s *State, p ReportReady) error {
	g, ok := s.Generations[p.Generation]
	if !ok {
		return reject(ErrUnknownGeneration, "generation %d", p.Generation)
	}
	// Informational for any known generation: a late Ready for a
	// superseded one is a harmless race, not an error worth a retry.
	g.ReadyNodes[p.NodeID] = p.Time
	delete(g.NodeErrors, p.NodeID)
	s.Generations[p.Generation] = g
	return nil
}

// applyFailed records a node's compile errors and drops its Ready. What
// it does to a STAGED generation depends on the entry's version:
//
//   - version 1 (builds before node failures were left behind) made it
//     INVALID for the whole cluster: one misconfigured node failed every
//     generation. Old entries keep that meaning when a log is replayed.
//   - version 2 leaves it STAGED: the leader promotes without the nodes
//     that failed while a majority of the serving nodes can load it, and
//     proposes MarkInvalid when none can (internal/cluster/staging.go).
//
// An ACTIVE generation stays active either way: the failing node keeps
// serving its old bundle, out of rotation, with its errors on record.
func applyFailed(s *State, version uint8, p ReportFailed) error {
	g, ok := s.Generations[p.Generation]
	if !ok {
		return reject(ErrUnknownGeneration, "generation %d", p.Generation)
	}
	g.NodeErrors[p.NodeID] = p.Errors
	delete(g.ReadyNodes, p.NodeID)
	if g.State == GenerationStaged && version == 1 {
		invalidate(s, &g, p.Time)
	}
	s.Generations[p.Generation] = g
	return nil
}

func applyActivate(s *State, p ActivateGeneration) error {
	g, ok := s.Generations[p.Generation]
	if !ok {
		return reject(ErrUnknownGeneration, "generation %d", p.Generation)
	}
	if g.State != GenerationStaged {
		return reject(ErrGenerationState, "generation %d is %s, only a STAGED generation can be activated",
			p.Generation, g.State)
	}
	if prev, ok := s.PreviousGeneration(); ok {
		prev.Files, prev.Chunked = nil, nil // two generations back: nothing pins it any more
		s.Generations[prev.Number] = prev
	}
	s.Previous = 0
	if cur, ok := s.ActiveGeneration(); ok {
		cur.setState(GenerationRetired, p.Time)
		s.Generations[cur.Number] = cur
		s.Previous = cur.Number
	}
	g.setState(GenerationActive, p.Time)
	g.ActivateTime = p.Time
	s.Generations[g.Number] = g
	s.Active, s.Staged = g.Number, 0
	pruneHistory(s)
	return nil
}

func applyMarkInvalid(s *State, p MarkInvalid) error {
	g, ok := s.Generations[p.Generation]
	if !ok {
		return recordInvalid(s, p)
	}
	if p.Commit != "" && p.Commit != g.Commit {
		return reject(ErrInvalidCommand, "generation %d is commit %s, not %s", p.Generation, g.Commit, p.Commit)
	}
	switch g.State {
	case GenerationStaged:
		invalidate(s, &g, p.Time)
	case GenerationInvalid:
	default:
		return reject(ErrGenerationState, "generation %d is %s; roll back with a new generation instead",
			p.Generation, g.State)
	}
	g.LeaderErrors = p.Errors
	s.Generations[p.Generation] = g
	return nil
}

// recordInvalid keeps a commit that failed before staging, so the failure
// is visible beside the generations that made it.
func recordInvalid(s *State, p MarkInvalid) error {
	if p.Generation <= s.Highest {
		return reject(ErrGenerationNotNewer, "generation %d is not above the highest known %d",
			p.Generation, s.Highest)
	}
	s.Generations[p.Generation] = Generation{
		Number:       p.Generation,
		State:        GenerationInvalid,
		Commit:       p.Commit,
		Etags:        map[string]string{},
		CreateTime:   p.Time,
		StateTime:    p.Time,
		ReadyNodes:   map[string]time.Time{},
		NodeErrors:   map[string][]string{},
		LeaderErrors: p.Errors,
	}
	s.Highest = p.Generation
	pruneHistory(s)
	return nil
}

// invalidate turns the staged generation g into an INVALID one.
func invalidate(s *State, g *Generation, t time.Time) {
	g.setState(GenerationInvalid, t)
	g.Files, g.Chunked = nil, nil
	if s.Staged == g.Number {
		s.Staged = 0
	}
}

func (g *Generation) setState(st GenerationState, t time.Time) {
	g.State, g.StateTime = st, t
}

// pruneHistory drops the oldest records beyond HistoryLimit, never the
// active, previous or staged one. Deterministic: it depends on numbers only.
func pruneHistory(s *State) {
	excess := len(s.Generations) - HistoryLimit
	for _, n := range s.GenerationNumbers() {
		if excess <= 0 {
			return
		}
		if n == s.Active || n == s.Previous || n == s.Staged {
			continue
		}
		delete(s.Generations, n)
		excess--
	}
}

func nonNil[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}
