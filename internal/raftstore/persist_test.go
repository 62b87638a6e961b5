package raftstore

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestFSMPersistsLifecycleCommandsBeforePublishing: the synchronous
// persist runs for Stage, Activate, MarkInvalid and ReportFailed only when
// they are accepted, and before the new state is visible to any reader.
func TestFSMPersistsLifecycleCommandsBeforePublishing(t *testing.T) {
	h := newHarness(t, false)
	var got []uint64
	h.fsm.setPersist(func(index uint64) {
		if seen := h.fsm.State().LastIndex; seen != index-1 {
			t.Errorf("persist of %d ran after the state was published (readers see %d)", index, seen)
		}
		got = append(got, index)
	})
	h.mustApply(stage(1, 1))                                                         // 1
	h.mustApply(&UpsertNode{ID: "a", Time: at(1)})                                   // 2
	h.mustApply(&ReportReady{Generation: 1, NodeID: "a", Time: at(2)})               // 3
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(3)})                     // 4
	if err := h.apply(&ActivateGeneration{Generation: 9, Time: at(4)}); err == nil { // 5
		t.Fatal("activating an unknown generation was accepted")
	}
	h.mustApply(&SetNodeState{ID: "a", State: NodeActive})                                      // 6
	h.mustApply(&MarkInvalid{Generation: 2, Commit: "bad", Errors: []string{"x"}, Time: at(6)}) // 7
	h.mustApply(stage(3, 7))                                                                    // 8
	h.mustApply(&ReportFailed{Generation: 3, NodeID: "a", Errors: []string{"y"}, Time: at(8)})  // 9
	if want := []uint64{1, 4, 7, 8, 9}; !slices.Equal(got, want) {
		t.Fatalf("persisted synchronously at %v, want %v", got, want)
	}
}

// crash stops s like kill -9 would leave its data directory: raft stops
// and bolt is closed, but the background persister never writes again
// (stopped by the caller before the commands of interest) and Close's
// final write does not happen.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.closeOnce.Do(func() {
		err := errors.Join(s.raft.Shutdown().Error(), s.closeStorage())
		if err != nil {
			t.Fatal(err)
		}
		s.closeErr = errors.New("crashed")
	})
}

// restoredAlone is what Open restores from dir before raft starts: the
// state a restarted node serves without a leader.
func restoredAlone(t *testing.T, dir string) *State {
	t.Helper()
	cfg := Config{NodeID: "solo", DataDir: dir, Logger: testLogger(t, "restore")}.withDefaults()
	bolt, snaps, err := openDisk(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	fsm := NewFSM(FSMConfig{})
	if err := restoreLocal(fsm, snaps, bolt, bolt, cfg.Logger); err != nil {
		t.Fatal(err)
	}
	return fsm.State()
}

// TestCrashRightAfterActivationRestoresIt reproduces the restart race of
// test/system TestRestartRightAfterSwap deterministically: with the
// background persister stopped, a write it would make later can never
// land, so the restored state holds exactly what was made durable before
// the state was published. A node that saw (and served) the activation
// must restore it; a node update after it is only written in the
// background and may be lost, which costs nothing but a catch-up.
func TestCrashRightAfterActivationRestoresIt(t *testing.T) {
	dir := t.TempDir()
	s := openTCP(t, "solo", "127.0.0.1:0", dir, true)
	if _, _, err := s.WaitForLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	propose(t, s, stage(1, 1))
	propose(t, s, &ActivateGeneration{Generation: 1})
	s.persister.stopBackground()

	propose(t, s, stage(2, 2))
	act := propose(t, s, &ActivateGeneration{Generation: 2})
	propose(t, s, &UpsertNode{ID: "late"})
	// The observer: it sees the activation (the node loader would swap to
	// generation 2 now), then the process dies.
	if s.State().Active != 2 {
		t.Fatal("activation not applied")
	}
	if got := s.Stats()["fsm_persisted_index"]; got != strconv.FormatUint(act.Index, 10) {
		t.Errorf("persisted index %s, want the activation's %d", got, act.Index)
	}
	crash(t, s)

	st := restoredAlone(t, dir)
	if st.Active != 2 || st.LastIndex != act.Index {
		t.Fatalf("restored active %d at index %d; the node served generation 2 (index %d) before the crash",
			st.Active, st.LastIndex, act.Index)
	}
	if _, ok := st.Nodes["late"]; ok {
		t.Error("the node update after the activation was replayed without a recorded applied index")
	}

	// A real restart serves generation 2 from the start, and raft delivers
	// the tail once it leads again.
	s = openTCP(t, "solo", addr, dir, false)
	if s.State().Active != 2 {
		t.Fatalf("reopened with active %d", s.State().Active)
	}
	eventually(t, 10*time.Second, "the log tail", func() bool {
		_, ok := s.State().Nodes["late"]
		return ok
	})
}

// TestPersisterNeverLowersTheIndex: a background write that read an older
// state cannot overwrite a newer synchronous one.
func TestPersisterNeverLowersTheIndex(t *testing.T) {
	stable := raft.NewInmemStore()
	h := newHarness(t, false)
	h.mustApply(stage(1, 1))
	p := startPersister(h.fsm, stable, testLogger(t, "persister"))
	p.stopBackground()
	p.persistNow(5)
	p.flush() // the published state is still at 1
	if got, err := stable.GetUint64([]byte(keyAppliedIndex)); err != nil || got != 5 {
		t.Fatalf("recorded %d (%v), want 5", got, err)
	}
	p.close()
	if h.fsm.persist != nil {
		t.Error("close left the synchronous persist installed")
	}
}
