package raftstore

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// recoveryFixture: commands at indexes 1..10 (stage 1..10), a snapshot of
// the state after index 3, and an applied index set by the test.
func recoveryFixture(t *testing.T, applied uint64) (*raft.InmemStore, *raft.InmemSnapshotStore) {
	logs := raft.NewInmemStore()
	h := newHarness(t, false)
	snaps := raft.NewInmemSnapshotStore()
	for i := uint64(1); i <= 10; i++ {
		entry := logEntry(t, i, mustCmd(t, stage(i, int(i))))
		if err := logs.StoreLog(entry); err != nil {
			t.Fatal(err)
		}
		h.fsm.Apply(entry)
		if i == 3 {
			sink, err := snaps.Create(raft.SnapshotVersionMax, 3, 1, raft.Configuration{}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteSnapshot(sink, h.fsm.State()); err != nil {
				t.Fatal(err)
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := logs.SetUint64([]byte(keyAppliedIndex), applied); err != nil {
		t.Fatal(err)
	}
	return logs, snaps
}

func TestRestoreLocalReplaysUpToAppliedIndex(t *testing.T) {
	logs, snaps := recoveryFixture(t, 7)
	fsm := NewFSM(FSMConfig{})
	if err := restoreLocal(fsm, snaps, logs, logs, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	// 8..10 may be an uncommitted tail: raft applies them once a leader
	// confirms them, and the FSM's index guard skips 4..7 then.
	if s := fsm.State(); s.LastIndex != 7 || s.Staged != 7 {
		t.Fatalf("after replay: last index %d, staged %d", s.LastIndex, s.Staged)
	}
	for i := uint64(4); i <= 10; i++ {
		var entry raft.Log
		_ = logs.GetLog(i, &entry)
		fsm.Apply(&entry)
	}
	if s := fsm.State(); s.LastIndex != 10 || s.Staged != 10 {
		t.Fatalf("after raft's apply: last index %d, staged %d", s.LastIndex, s.Staged)
	}
}

func TestRestoreLocalRefusesMissingEntries(t *testing.T) {
	cases := map[string]struct {
		applied uint64
		damage  func(*raft.InmemStore)
		want    string
	}{
		"applied beyond the log": {applied: 12, want: "only reaches"},
		"gap after snapshot": {applied: 7, want: "log starts at 6",
			damage: func(l *raft.InmemStore) { _ = l.DeleteRange(1, 5) }},
		"hole in the log": {applied: 7, want: "read log entry 8",
			damage: func(l *raft.InmemStore) { _ = l.DeleteRange(8, 8) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			logs, snaps := recoveryFixture(t, tc.applied)
			if tc.damage != nil {
				tc.damage(logs)
			}
			err := restoreLocal(NewFSM(FSMConfig{}), snaps, logs, logs, hclog.NewNullLogger())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
