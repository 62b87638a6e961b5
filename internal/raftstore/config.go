package raftstore

import (
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Timeouts are the raft timers. Raft requires LeaderLease <= Heartbeat and
// Election >= Heartbeat.
type Timeouts struct {
	// Heartbeat is how long a follower waits without hearing from the
	// leader before it starts an election (raft sends heartbeats at a tenth
	// of it).
	Heartbeat time.Duration
	// Election is how long a candidate waits for votes before retrying.
	Election time.Duration
	// LeaderLease is how long a leader keeps leading without contact with a
	// quorum before it steps down.
	LeaderLease time.Duration
	// Commit is how long the leader may wait before sending new entries;
	// it bounds commit latency when there is no other traffic.
	Commit time.Duration
}

// DefaultTimeouts are tuned for a LAN. Decisions are served from memory on
// every node whether or not there is a leader, so a slower failover only
// delays promotions; spurious elections, on the other hand, abort
// in-flight Stage/Activate proposals. Hence 500 ms rather than the 100 ms a
// LAN could technically sustain: it rides out GC pauses and the fsync of
// an 8 MiB bundle on a slow disk, and still fails over in about a second.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:   500 * time.Millisecond,
		Election:    500 * time.Millisecond,
		LeaderLease: 250 * time.Millisecond,
		Commit:      50 * time.Millisecond,
	}
}

// Defaults for Config fields left zero.
const (
	// DefaultSnapshotThreshold is the number of log entries between
	// snapshots. Low, because a restarting node replays the log tail and
	// each Stage entry may be a large bundle.
	DefaultSnapshotThreshold = 1024
	// DefaultTrailingLogs is kept after a snapshot so a briefly absent
	// follower catches up from the log rather than a full snapshot.
	DefaultTrailingLogs = 1024
	// DefaultSnapshotInterval is how often raft checks the threshold.
	DefaultSnapshotInterval = 2 * time.Minute
	// DefaultApplyTimeout bounds Apply when the context has no deadline.
	DefaultApplyTimeout = 10 * time.Second
	// DefaultMinFreeBytes: below this the data directory is reported low.
	// Raft needs a replication batch (16 entries of up to 8 MiB), two
	// snapshots (each up to a few bundles plus the tables) and bolt's file
	// growth; 512 MiB leaves an operator time to act before appends fail.
	DefaultMinFreeBytes = 512 << 20
	// DefaultSpaceCheckInterval is how often free space is looked at.
	DefaultSpaceCheckInterval = 10 * time.Second
	// maxAppendEntries bounds one replication batch, which may hold
	// several bundles during catch-up.
	maxAppendEntries = 16
	// snapshotsRetained on disk; the older one covers a crash while the
	// newest is being written.
	snapshotsRetained = 2
)

// Config configures a Store. Zero values take the defaults above.
type Config struct {
	// NodeID is the raft server id; it must be stable across restarts.
	NodeID string
	// RaftAddr is the TCP address to bind, e.g. "0.0.0.0:7000" or
	// "127.0.0.1:0" in tests. Ignored when Transport is set.
	RaftAddr string
	// AdvertiseAddr is the address peers dial; defaults to the bound
	// address, and is required when RaftAddr is a wildcard.
	AdvertiseAddr string
	// DataDir holds raft.db (log and stable store) and snapshots/.
	DataDir string
	// Bootstrap makes this node form a single-voter cluster on first start.
	// On later starts it is harmless.
	Bootstrap bool
	// Logger is the root logger; raft logs through Logger.Named("raft").
	Logger hclog.Logger
	// Transport overrides the TCP transport (tests: raft.InmemTransport).
	// Raft closes it on shutdown.
	Transport raft.Transport
	// StreamLayer, when set, carries raft over it instead of plain TCP on
	// RaftAddr (mutual TLS: see StreamLayer). Ignored when Transport is set.
	StreamLayer raft.StreamLayer
	// InMemory keeps log, stable store and snapshots in memory (tests).
	InMemory bool
	// Timeouts are the raft timers; zero means DefaultTimeouts.
	Timeouts Timeouts
	// SnapshotThreshold, SnapshotInterval and TrailingLogs tune raft's
	// snapshots and log compaction.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// ApplyTimeout bounds Apply when its context has no deadline.
	ApplyTimeout time.Duration
	// IgnoreUnknown is passed to the FSM (rolling upgrades).
	IgnoreUnknown bool
	// Now stamps zero times in Propose; defaults to time.Now.
	Now func() time.Time
	// MinFreeBytes is the free space of DataDir's file system below which
	// the Store logs a warning (once, until it recovers); zero means
	// DefaultMinFreeBytes. SpaceCheckInterval is how often it looks.
	MinFreeBytes       uint64
	SpaceCheckInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	c.Timeouts = c.Timeouts.withDefaults()
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = DefaultMinFreeBytes
	}
	if c.SpaceCheckInterval == 0 {
		c.SpaceCheckInterval = DefaultSpaceCheckInterval
	}
	return c
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	for _, f := range []struct{ v, d *time.Duration }{
		{&t.Heartbeat, &d.Heartbeat}, {&t.Election, &d.Election},
		{&t.LeaderLease, &d.LeaderLease}, {&t.Commit, &d.Commit},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return t
}

func (c Config) validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("raftstore: NodeID is required")
	case c.Transport == nil && c.StreamLayer == nil && c.RaftAddr == "":
		return errors.New("raftstore: RaftAddr is required")
	case !c.InMemory && c.DataDir == "":
		return errors.New("raftstore: DataDir is required unless InMemory")
	}
	return nil
}

func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.Timeouts.Heartbeat
	rc.ElectionTimeout = c.Timeouts.Election
	rc.LeaderLeaseTimeout = c.Timeouts.LeaderLease
	rc.CommitTimeout = c.Timeouts.Commit
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	rc.MaxAppendEntries = maxAppendEntries
	rc.Logger = c.Logger.Named("raft")
	// The Store restores the latest snapshot itself and replays the
	// committed log tail before raft starts (see recovery.go); raft must
	// not restore it a second time over the replayed state.
	rc.NoSnapshotRestoreOnStart = true
	return rc
}
