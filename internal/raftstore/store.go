package raftstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/logging"
)

// Store is one node's raft: storage, transport, FSM and the operations the
// rest of the program needs. Writes go through Apply/Propose on the leader;
// reads come from State on any node.
type Store struct {
	cfg       Config
	logger    hclog.Logger
	raft      *raft.Raft
	fsm       *FSM
	transport raft.Transport
	disk      *checkedStore     // nil when InMemory
	persister *appliedPersister // nil when InMemory
	space     *spaceWatch       // nil when InMemory
	cv        clusterVersion    // the lowest release among the voters (features.go)

	closeOnce sync.Once
	closeErr  error
}

// Result describes a command the cluster applied.
type Result struct {
	// Index is the raft log index of the command. Followers have applied
	// it once their State().LastIndex reaches it (see WaitForIndex).
	Index uint64
}

// Open starts a node. With a DataDir it first restores the local state
// (snapshot plus committed log tail), so State serves the last active
// generation as soon as Open returns, with or without a leader. Damaged
// raft data makes Open fail with an error wrapping ErrCorrupt.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, logger: cfg.Logger}
	s.fsm = NewFSM(FSMConfig{IgnoreUnknown: cfg.IgnoreUnknown, Logger: cfg.Logger.Named(logging.FSM)})
	logs, stable, snaps, err := s.openStores()
	if err != nil {
		return nil, err
	}
	if s.disk != nil {
		// Installed before raft starts, so no apply goes unrecorded:
		// lifecycle commands synchronously, the rest in the background.
		s.persister = startPersister(s.fsm, s.disk, cfg.Logger.Named(logging.FSM))
		s.space = startSpaceWatch(cfg.Logger.Named(logging.Raft), cfg.DataDir, cfg.MinFreeBytes, cfg.SpaceCheckInterval)
	}
	if err := s.openRaft(logs, stable, snaps); err != nil {
		if s.persister != nil {
			s.persister.close()
		}
		_ = s.closeStorage()
		return nil, err
	}
	return s, nil
}

// openStores opens (and for disk, verifies and replays) the raft storage.
func (s *Store) openStores() (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
	if s.cfg.InMemory {
		mem := raft.NewInmemStore()
		return mem, mem, raft.NewInmemSnapshotStore(), nil
	}
	disk, snaps, err := openDisk(s.cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	s.disk = disk
	if err := restoreLocal(s.fsm, snaps, disk, disk, s.logger); err != nil {
		_ = s.closeStorage()
		return nil, nil, nil, corruptErr(s.cfg.DataDir, err)
	}
	return disk, disk, snaps, nil
}

func (s *Store) openRaft(logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	trans, err := s.openTransport()
	if err != nil {
		return err
	}
	s.transport = trans
	r, err := raft.NewRaft(s.cfg.raftConfig(), s.fsm, logs, stable, snaps, trans)
	if err != nil {
		_ = closeTransport(trans)
		return fmt.Errorf("start raft: %w", err)
	}
	s.raft = r
	if it, ok := trans.(*idTransport); ok {
		it.setSource(r)
	}
	if !s.cfg.Bootstrap {
		return nil
	}
	err = r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.NodeID), Address: trans.LocalAddr(),
	}}}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		_ = r.Shutdown().Error()
		return fmt.Errorf("bootstrap: %w", err)
	}
	// ErrCantBootstrap: existing state, this is a restart. Nothing to do.
	return nil
}

func (s *Store) openTransport() (raft.Transport, error) {
	if s.cfg.Transport != nil {
		return s.cfg.Transport, nil
	}
	if s.cfg.StreamLayer != nil {
		return newStreamTransport(s.cfg), nil
	}
	var advertise net.Addr
	if s.cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", s.cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("advertise address %q: %w", s.cfg.AdvertiseAddr, err)
		}
		advertise = a
	}
	t, err := raft.NewTCPTransportWithLogger(s.cfg.RaftAddr, advertise, 3, 10*time.Second,
		s.cfg.Logger.Named(logging.Raft))
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", s.cfg.RaftAddr, err)
	}
	return t, nil
}

func closeTransport(t raft.Transport) error {
	if c, ok := t.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// Close stops raft, persists the applied index and closes storage. Safe to
// call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		// Raft closes the transport on shutdown.
		err := s.raft.Shutdown().Error()
		if s.persister != nil {
			s.persister.close()
		}
		s.closeErr = errors.Join(err, s.closeStorage())
	})
	return s.closeErr
}

func (s *Store) closeStorage() error {
	if s.space != nil {
		s.space.close()
	}
	if s.disk == nil {
		return nil
	}
	return s.disk.Close()
}

// WriteFailures counts raft's failed writes to its data directory (log
// entries, term and vote, applied index) since Open; 0 when InMemory.
func (s *Store) WriteFailures() uint64 {
	if s.disk == nil {
		return 0
	}
	return s.disk.mon.failures.Load()
}

// DataDirFreeBytes is the free space of the file system holding DataDir.
func (s *Store) DataDirFreeBytes() (uint64, error) {
	if s.cfg.InMemory {
		return 0, errors.New("raftstore: in memory, no data directory")
	}
	return freeBytes(s.cfg.DataDir)
}

// ID returns the node id.
func (s *Store) ID() string { return s.cfg.NodeID }

// Addr returns the raft address peers use for this node.
func (s *Store) Addr() string { return string(s.transport.LocalAddr()) }

// State returns the current replicated state; see FSM.State. With a
// DataDir, a state produced by Stage, Activate, MarkInvalid or ReportFailed
// is durable before State or Subscribe can show it: after a crash, Open
// restores at least that far, so a caller may act on what it sees (serve
// the active generation) without waiting for anything.
func (s *Store) State() *State { return s.fsm.State() }

// Subscribe signals state changes; see FSM.Subscribe.
func (s *Store) Subscribe() (<-chan struct{}, func()) { return s.fsm.Subscribe() }

// IsLeader reports whether this node is the leader right now.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the current leader's id and raft address, empty if none
// is known.
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderCh delivers true when this node gains leadership and false when it
// loses it. There is one such channel per node: give it to one consumer.
func (s *Store) LeaderCh() <-chan bool { return s.raft.LeaderCh() }

// Apply proposes cmd and waits until it is committed and applied on the
// leader, or ctx ends (the outcome is then unknown). On a follower it
// returns ErrNotLeader: forward to Leader(). An invalid command (see
// Command.Validate) never reaches the log. A command the state machine
// refused returns an error wrapping ErrRejected, with the Result filled in.
func (s *Store) Apply(ctx context.Context, cmd Command) (Result, error) {
	if !s.IsLeader() {
		return Result{}, ErrNotLeader
	}
	if err := cmd.Validate(); err != nil {
		return Result{}, err
	}
	if err := s.checkFeature(cmd); err != nil {
		return Result{}, err
	}
	data, err := cmd.Marshal()
	if err != nil {
		return Result{}, fmt.Errorf("encode command: %w", err)
	}
	f := s.raft.Apply(data, s.timeout(ctx))
	if err := waitFuture(ctx, f); err != nil {
		return Result{}, err
	}
	res := Result{Index: f.Index()}
	if err, ok := f.Response().(error); ok && err != nil {
		return res, err
	}
	return res, nil
}

// Propose stamps a zero time in p with Config.Now (when p is a pointer),
// encodes it and applies it. It is the convenient path for the leader loop:
// the time is decided here, before the log, never inside Apply.
func (s *Store) Propose(ctx context.Context, p Payload) (Result, error) {
	stampTime(p, s.cfg.Now())
	cmd, err := NewCommand(p)
	if err != nil {
		return Result{}, err
	}
	return s.Apply(ctx, cmd)
}

func (s *Store) timeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return s.cfg.ApplyTimeout
}

// waitFuture waits for f or ctx. On ctx's end the future is abandoned; raft
// still resolves it later, which ends the helper goroutine.
func waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("waiting for raft (outcome unknown): %w", ctx.Err())
	}
}

// WaitForLeader waits until some node is known as leader and returns it.
func (s *Store) WaitForLeader(ctx context.Context) (id, addr string, err error) {
	err = waitUntil(ctx, 10*time.Millisecond, func() bool {
		id, addr = s.Leader()
		return id != ""
	})
	return id, addr, err
}

// WaitForIndex waits until this node's FSM has applied the command at
// index (a Result.Index), e.g. to read one's own write on a follower.
func (s *Store) WaitForIndex(ctx context.Context, index uint64) error {
	ch, cancel := s.fsm.Subscribe()
	defer cancel()
	for s.fsm.State().LastIndex < index {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for index %d (at %d): %w", index, s.fsm.State().LastIndex, ctx.Err())
		}
	}
	return nil
}

// sendCommitEnqueue bounds how long SendCommit waits for raft to take
// its barrier: it is an optimisation, never worth holding an answer for.
const sendCommitEnqueue = 50 * time.Millisecond

// SendCommit has the leader send its followers its commit index now
// rather than at the next commit timeout (50 to 100 ms with the default
// timeouts): it appends a raft barrier, which raft replicates at once
// with the commit index, and does not wait for it. A follower waiting
// for a write it forwarded (WaitForIndex) then applies it about one
// round trip after the leader's answer. The barrier is raft's own entry
// type, never the FSM's, which every release of raft reads. On a
// follower raft refuses it, and nothing happens.
func (s *Store) SendCommit() {
	_ = s.raft.Barrier(sendCommitEnqueue)
}

// waitUntil polls cond; used where raft offers no event to wait on.
func waitUntil(ctx context.Context, every time.Duration, cond func() bool) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Snapshot asks raft to take a snapshot now (tests, operators before
// maintenance).
func (s *Store) Snapshot() error { return s.raft.Snapshot().Error() }

// Stats returns raft's statistics plus the FSM's applied index and, with a
// DataDir, the applied index recorded for a restart.
func (s *Store) Stats() map[string]string {
	st := s.raft.Stats()
	st["fsm_last_index"] = strconv.FormatUint(s.fsm.State().LastIndex, 10)
	if s.persister != nil {
		st["fsm_persisted_index"] = strconv.FormatUint(s.persister.recorded(), 10)
	}
	return st
}
