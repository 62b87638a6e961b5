package raftstore

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FSMConfig configures an FSM.
type FSMConfig struct {
	// IgnoreUnknown is passed to the Applier (rolling upgrades).
	IgnoreUnknown bool
	// Logger receives warnings about ignored commands. Optional.
	Logger hclog.Logger
}

// FSM is the raft.FSM: a thin adapter that decodes log entries and hands
// them to an Applier. It publishes each new state as an immutable value
// (copy-on-write), so readers never lock and never see a half-applied
// command.
type FSM struct {
	ignoreUnknown bool
	logger        hclog.Logger

	// mu serialises writers (Apply, Restore, startup replay). Readers use
	// the atomic pointer only.
	mu    sync.Mutex
	state atomic.Pointer[State]
	// persist, when set (Store with a DataDir), makes an applied index
	// durable. Apply calls it for lifecycle commands before it publishes
	// the state they produce; see setPersist.
	persist func(index uint64)

	subs subscribers
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an FSM holding an empty state.
func NewFSM(cfg FSMConfig) *FSM {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	f := &FSM{ignoreUnknown: cfg.IgnoreUnknown, logger: cfg.Logger}
	f.state.Store(NewState())
	return f
}

// State returns the current state. The value is never modified afterwards:
// read it freely from any goroutine, never write to it.
func (f *FSM) State() *State { return f.state.Load() }

// Subscribe returns a channel that receives a signal after the state
// changes (apply or restore). Signals coalesce: the channel holds at most
// one, so a slow reader never blocks raft; on each signal, read State()
// for the latest value. Call cancel to stop the subscription.
func (f *FSM) Subscribe() (ch <-chan struct{}, cancel func()) {
	return f.subs.add()
}

// Apply implements raft.FSM. Its result is nil or an error that wraps
// ErrRejected. Entries at or below State.LastIndex are skipped: the
// startup replay (see Store) may already have applied them.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.state.Load()
	if l.Index <= cur.LastIndex {
		return nil
	}
	next := cur.Clone()
	typ, err := f.applyData(next, l.Data)
	// A rejected command still consumes its index, so LastIndex always
	// equals the index of the last command entry seen.
	next.LastIndex = l.Index
	if err == nil && f.persist != nil && persistBeforePublish(typ) {
		// Durable before anyone can see it: a node that acted on this
		// state (swapped to the activated generation) and then crashed
		// restores at least this far. Raft applies only committed
		// entries, so the index is a safe lower bound of the commit.
		f.persist(l.Index)
	}
	f.state.Store(next)
	f.subs.notify()
	if errors.Is(err, ErrUnknownCommand) {
		// Nobody else sees a follower's refusal: the leader got its own
		// answer. This node now lacks what the others applied.
		f.logger.Error("refused an entry this build cannot apply: upgrade this node", "index", l.Index, "error", err)
	}
	return err
}

// persistBeforePublish lists the commands whose applied index is made
// durable before the state is published: those that move a generation
// through its lifecycle, which the node loader and the API act on. They
// come a few per promotion, so the extra fsync is off the hot path
// (readiness, node, experiment and record updates), whose index the
// background persister records.
func persistBeforePublish(t CommandType) bool {
	switch t {
	case TypeStageGeneration, TypeActivateGeneration, TypeMarkInvalid, TypeReportFailed:
		return true
	}
	return false
}

// setPersist installs (or with nil removes) the synchronous persist of
// lifecycle commands. The Store sets it after its startup replay, whose
// entries are durable already, and before raft starts.
func (f *FSM) setPersist(fn func(index uint64)) {
	f.mu.Lock()
	f.persist = fn
	f.mu.Unlock()
}

func (f *FSM) applyData(s *State, data []byte) (CommandType, error) {
	cmd, err := DecodeCommand(data)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	if f.ignoreUnknown {
		if op, ok := ignoredOp(cmd); ok {
			f.logger.Warn("ignoring unknown command, upgrade this node", "entry", cmd.Type,
				"type", op.Type, "version", op.Version)
		}
	}
	a := Applier{State: s, IgnoreUnknown: f.ignoreUnknown}
	return cmd.Type, a.Apply(cmd)
}

// snapshotFormat versions the snapshot encoding, separately from commands.
// Format 2 has the typed tables; format 1 (the builds before them) is
// migrated on restore. A build that knows only format 1 refuses a format-2
// snapshot rather than silently dropping the tables it does not know.
const (
	snapshotFormat       = 2
	legacySnapshotFormat = 1
)

// snapshotFile is the JSON document a snapshot holds.
type snapshotFile struct {
	Format int `json:"format"`
	// Summary comes before State so that a backup reads it from the
	// first bytes (backup.go); decoding ignores it.
	Summary *SnapshotSummary `json:"summary,omitempty"`
	State   *State           `json:"state"`
}

// Snapshot implements raft.FSM. The published state is immutable, so the
// snapshot just keeps the pointer; Persist can run concurrently with new
// applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{state: f.state.Load()}, nil
}

// Restore implements raft.FSM: it decodes into a new state off to the side
// and swaps it in one step, so a failed restore leaves the old state.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, dropped, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	if len(dropped) > 0 {
		f.logger.Warn("old snapshot: records no table takes were dropped", "names", dropped)
	}
	f.mu.Lock()
	f.state.Store(s)
	f.mu.Unlock()
	f.subs.notify()
	return nil
}

// ReadSnapshot decodes a snapshot written by the FSM, migrating one of an
// older format. Recovery tools use it to inspect a snapshot without raft.
func ReadSnapshot(r io.Reader) (*State, error) {
	s, _, err := readSnapshot(r)
	return s, err
}

// readSnapshot also returns the names a migration dropped.
func readSnapshot(r io.Reader) (*State, []string, error) {
	file, err := decodeSnapshotFile(r)
	if err != nil {
		return nil, nil, err
	}
	return finishSnapshot(file)
}

// finishSnapshot checks a decoded snapshot's format and brings its state
// to the current one.
func finishSnapshot(file *snapshotFile) (*State, []string, error) {
	switch file.Format {
	case snapshotFormat, legacySnapshotFormat, chunkedSnapshotFormat:
	default:
		return nil, nil, fmt.Errorf("snapshot format %d is not supported (want %d to %d): upgrade this node",
			file.Format, legacySnapshotFormat, chunkedSnapshotFormat)
	}
	if file.State == nil {
		return nil, nil, fmt.Errorf("snapshot has no state")
	}
	file.State.normalize()
	if file.Format == chunkedSnapshotFormat {
		if err := restoreChunked(file.State); err != nil {
			return nil, nil, err
		}
	}
	var dropped []string
	if file.Format == legacySnapshotFormat {
		dropped = migrateState(file.State)
	}
	return file.State, dropped, nil
}

// WriteSnapshot encodes s in the snapshot format: the JSON document
// snapshotFile describes, streamed to w (snapwrite.go) so that writing
// it holds one record at a time, not the encoded state.
func WriteSnapshot(w io.Writer, s *State) error {
	return writeSnapshotStream(w, s)
}

type fsmSnapshot struct{ state *State }

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.state); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot; nothing is held.
func (s *fsmSnapshot) Release() {}

// subscribers fans out coalescing change signals.
type subscribers struct {
	mu   sync.Mutex
	next int
	chs  map[int]chan struct{}
}

func (s *subscribers) add() (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chs == nil {
		s.chs = map[int]chan struct{}{}
	}
	id := s.next
	s.next++
	ch := make(chan struct{}, 1)
	s.chs[id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.chs, id)
			s.mu.Unlock()
		})
	}
}

func (s *subscribers) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.chs {
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending: coalesce
		}
	}
}
